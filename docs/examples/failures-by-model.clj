(let [r (tool/call 'observatory/list-traces {:org-id "org_acme" :status "error" :limit 200})]
  (if (:ok r)
    (->> (:value r)
         (group-by :model)
         (map (fn [[model ts]] {:model model :failures (count ts) :cost (sum-by :cost_usd ts)}))
         (sort-by :failures >))
    r))
