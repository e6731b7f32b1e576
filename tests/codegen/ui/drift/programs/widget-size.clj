(let [w (widgets/get-widget {:id data/id :org "acme"})]
  (:size (:value w)))
