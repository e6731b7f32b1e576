(tool/call 'widgets/delete-widget {:id data/id :org "acme"})
