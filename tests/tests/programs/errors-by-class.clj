(let [r (tool/call 'observatory/list-errors {:org-id data/org_id :limit 200})]
  (if (:ok r)
    (->> (:errors (:value r))
         (map :error_class)
         (frequencies)
         (sort-by (fn [[c n]] [(- n) c]))
         (into []))
    (fail r)))
