;; Re-checks the PTC-Lisp conformance corpus against real Clojure.
;;
;; Usage: clojure check_with_clojure.clj <corpus-dir> <divergences.md> [case-name-substring]
;; (check_with_clojure.sh wires the paths and the classpath up.)
;;
;; Every case runs in ONE JVM, each in a fresh namespace, so the slow JVM start-up is paid once.
;; Rules:
;;   plain case          Clojure's result must be `=` to (read-string expected)
;;   `;; !! reason`      Clojure must throw
;;   `;; divergence: id` Clojure must give something different (or throw); id must be documented
;;   `;; ptc-only`       evaluated with the PTC-extension prelude below (sum, avg, json/..., ...)
;;   `;; unchecked: why` not evaluated by Clojure at all (counted and listed as skipped)
;;   `;; data: {json}`   the request context: each top-level key becomes the var data/<key>
;;   `;; prints: "..."`  everything println/print/prn wrote must equal this string

(ns check-with-clojure
  (:require [clojure.set]
            [clojure.string :as string]
            [clojure.walk :as walk]))

(def data-json-available?
  (try (require 'clojure.data.json) true (catch Throwable _ false)))

;; ---------------------------------------------------------------------------
;; Corpus parsing (the Rust runner in tests/conformance.rs implements the same grammar)

(defn- marker [line prefix]
  (when (string/starts-with? line prefix)
    (string/trim (subs line (count prefix)))))

(defn parse-file [file]
  (let [lines (string/split-lines (slurp file))
        fname (.getName file)]
    (loop [[line & more :as ls] lines, lineno 1, cur nil, cases []]
      (if (empty? ls)
        (if (and cur (not (:done cur)))
          (conj cases (assoc cur :problem "case has no `;; =>` or `;; !!` line"))
          cases)
        (let [t (string/trimr line)]
          (cond
            (marker t ";; case:")
            (let [cases (if (and cur (not (:done cur)))
                          (conj cases (assoc cur :problem "case has no `;; =>` or `;; !!` line"))
                          cases)]
              (recur more (inc lineno)
                     {:file fname :line lineno :name (marker t ";; case:") :src []}
                     cases))

            (nil? cur) (recur more (inc lineno) cur cases)
            (:done cur) (recur more (inc lineno) cur cases)

            (= t ";; ptc-only") (recur more (inc lineno) (assoc cur :ptc-only true) cases)
            (marker t ";; unchecked:") (recur more (inc lineno) (assoc cur :unchecked (marker t ";; unchecked:")) cases)
            (marker t ";; divergence:") (recur more (inc lineno) (assoc cur :divergence (marker t ";; divergence:")) cases)
            (marker t ";; data:") (recur more (inc lineno) (assoc cur :data (marker t ";; data:")) cases)
            (marker t ";; prints:") (recur more (inc lineno) (assoc cur :prints (marker t ";; prints:")) cases)

            (marker t ";; =>")
            (let [c (assoc cur :expected (marker t ";; =>") :done true)]
              (recur more (inc lineno) c (conj cases c)))

            (marker t ";; !!")
            (let [c (assoc cur :error (marker t ";; !!") :done true)]
              (recur more (inc lineno) c (conj cases c)))

            :else (recur more (inc lineno) (update cur :src conj line) cases)))))))

;; ---------------------------------------------------------------------------
;; PTC extensions re-implemented in Clojure, so `;; ptc-only` cases are still checked by a real
;; Clojure evaluation of the same program (the helper encodes the documented PTC semantics).

(def ptc-prelude
  "(clojure.core/refer-clojure :exclude '[sort])
   (require '[clojure.string :as str] '[clojure.set :as set])
   (defn sort
     ([coll] (clojure.core/sort coll))
     ([cmp coll] (case cmp
                   :asc (clojure.core/sort coll)
                   :desc (clojure.core/sort (fn [a b] (compare b a)) coll)
                   (clojure.core/sort cmp coll))))
   (defn- accessor [k] (if (or (keyword? k) (string? k)) #(get % k) k))
   (defn sum [xs] (reduce + 0 xs))
   (defn avg [xs] (when (seq xs) (double (/ (reduce + 0 xs) (count xs)))))
   (defn- sum-by* [k xs] (reduce + 0 (keep k xs)))
   (defn sum-by [k xs] (sum-by* (accessor k) xs))
   (defn- avg-by* [k xs] (let [vs (keep k xs)] (when (seq vs) (double (/ (reduce + 0 vs) (count vs))))))
   (defn avg-by [k xs] (avg-by* (accessor k) xs))
   (defn- first-by [better? k xs]
     (reduce (fn [best x] (if (or (nil? best) (better? (k x) (k best))) x best)) nil xs))
   (defn- min-by* [k xs] (first-by < k xs))
   (defn min-by [k xs] (min-by* (accessor k) xs))
   (defn- max-by* [k xs] (first-by > k xs))
   (defn max-by [k xs] (max-by* (accessor k) xs))
   (defn- distinct-by* [k xs]
     (loop [[x & more :as xs] (seq xs) seen #{} out []]
       (if xs
         (let [v (k x)]
           (if (contains? seen v) (recur more seen out) (recur more (conj seen v) (conj out x))))
         out)))
   (defn distinct-by [k xs] (distinct-by* (accessor k) xs))
   (defn combinations [coll n]
     (cond (zero? n) [[]]
           (empty? coll) []
           :else (concat (map #(vec (cons (first coll) %)) (combinations (rest coll) (dec n)))
                         (combinations (rest coll) n))))
   (def join clojure.string/join)
   (def split clojure.string/split)
   (def upper-case clojure.string/upper-case)
   (def lower-case clojure.string/lower-case)
   (def upcase clojure.string/upper-case)
   (def downcase clojure.string/lower-case)
   (def includes? clojure.string/includes?)
   (def starts-with? clojure.string/starts-with?)
   (def ends-with? clojure.string/ends-with?)
   (def trim clojure.string/trim)
   (def blank? clojure.string/blank?)
   (def split-lines clojure.string/split-lines)
   (def index-of clojure.string/index-of)
   (def union clojure.set/union)
   (def intersection clojure.set/intersection)
   (def difference clojure.set/difference)
   (defn regex? [x] (instance? java.util.regex.Pattern x))
   (defn parse-int [s] (when (string? s) (parse-long s)))
   (defn floor [x] (Math/floor x))
   (defn ceil [x] (Math/ceil x))
   (defn sqrt [x] (Math/sqrt x))
   (defn pow [x y] (Math/pow x y))
   (defn round [x] (Math/round (double x)))")

(defn- install-json-ns! []
  (when data-json-available?
    (let [read-str (resolve 'clojure.data.json/read-str)
          write-str (resolve 'clojure.data.json/write-str)
          ns (create-ns 'json)]
      (intern ns 'parse-string
              (fn [s] (try (read-str s) (catch Throwable _ nil))))
      (intern ns 'generate-string
              (fn [v] (write-str v :escape-slash false :escape-unicode false
                                 :key-fn (fn [k] (if (keyword? k) (name k) (str k))))))
      (intern ns 'parse-lines
              (fn [s] (->> (string/split-lines s)
                           (remove string/blank?)
                           (mapv #(try (read-str %) (catch Throwable _ nil)))))))))

;; ---------------------------------------------------------------------------
;; Evaluation

(def counter (atom 0))

(defn- install-data-ns!
  "PTC programs read the request context as data/<key>; model it as a namespace `data` whose
  vars hold the JSON values (string keys, as a tool or host hands them over)."
  [json-text]
  (remove-ns 'data)
  (when json-text
    (let [read-str (or (resolve 'clojure.data.json/read-str)
                       (throw (ex-info "`;; data:` needs clojure.data.json" {})))
          ns (create-ns 'data)]
      (doseq [[k v] (read-str json-text)]
        (intern ns (symbol k) v)))))

(defn- eval-in-fresh-ns
  "Evaluates src; returns {:value v :out <everything printed>}."
  [src ptc-only? data]
  (install-data-ns! data)
  (let [ns (create-ns (symbol (str "conformance.case" (swap! counter inc))))
        out (java.io.StringWriter.)]
    ;; println output is captured (PTC-Lisp captures it too), compared for `;; prints:` cases.
    (binding [*ns* ns, *out* out]
      (if ptc-only?
        (load-string ptc-prelude)
        (do (refer-clojure)
            ;; PTC accepts these namespace aliases without a require, so the corpus may use them.
            (alias 'str 'clojure.string)
            (alias 'string 'clojure.string)
            (alias 'set 'clojure.set)))
      (let [v (load-string src)]
        ;; Force lazy results here so an error inside a lazy seq counts as a throw.
        (pr-str v)
        {:value v :out (str out)}))))

(defn- run-with-timeout [f ms]
  (let [fut (future (try (f) (catch Throwable t {:thrown t})))
        r (deref fut ms ::timeout)]
    (if (= r ::timeout)
      (do (future-cancel fut) {:timeout true})
      r)))

(defn- clip [s]
  (let [s (str s)] (if (> (count s) 300) (str (subs s 0 300) "...") s)))

(defn- describe-throw [^Throwable t]
  (let [root (loop [t t] (if-let [c (.getCause t)] (recur c) t))]
    (str (.getSimpleName (class root)) ": " (clip (.getMessage root)))))

(defn- contains-list? [x]
  (let [found (atom false)]
    (walk/postwalk (fn [y] (when (and (seq? y) (not (vector? y))) (reset! found true)) y) x)
    @found))

(defn check-case [c documented-ids]
  (let [src (string/join "\n" (:src c))
        ptc-only? (:ptc-only c)]
    (cond
      (:problem c) {:status :fail :why (:problem c)}
      (:unchecked c) {:status :skip :why (:unchecked c)}
      :else
      (let [expected (when (:expected c)
                       (try {:ok (read-string (:expected c))}
                            (catch Throwable t {:bad (describe-throw t)})))]
        (cond
          (:bad expected) {:status :fail :why (str "expected text does not read: " (:bad expected))}
          (and expected (contains-list? (:ok expected)))
          {:status :fail :why "expected value contains a list; write vectors (PTC sequences are vectors)"}
          (and (:divergence c) (not (contains? documented-ids (:divergence c))))
          {:status :fail :why (str "divergence rule `" (:divergence c) "` is not documented in docs/divergences.md")}
          :else
          (let [r (run-with-timeout #(eval-in-fresh-ns src ptc-only? (:data c)) 10000)
                got (cond (:timeout r) "<timeout>"
                          (:thrown r) (str "throws " (describe-throw (:thrown r)))
                          (:prints c) (clip (str (pr-str (:value r)) " printing " (pr-str (:out r))))
                          :else (clip (pr-str (:value r))))]
            (cond
              (:timeout r) {:status :fail :why "Clojure timed out" :got got}

              (:divergence c)
              (if (and (not (:thrown r)) expected (= (:ok expected) (:value r))
                       (or (nil? (:prints c)) (= (read-string (:prints c)) (:out r))))
                {:status :fail :why "marked as divergence but Clojure agrees" :got got}
                {:status :pass :div true :got got})

              (:error c)
              (if (:thrown r)
                {:status :pass}
                {:status :fail :why "expected an error but Clojure returns a value" :got got})

              (:thrown r) {:status :fail :why "Clojure throws" :got got}
              (and (:prints c) (not= (read-string (:prints c)) (:out r)))
              {:status :fail :why "Clojure prints something else" :got (pr-str (:out r))}
              (= (:ok expected) (:value r)) {:status :pass}
              :else {:status :fail :why "Clojure gives a different value" :got got})))))))

(defn documented-divergences [md-file]
  ;; A rule is documented by a heading line "## <rule-id>" (optionally with trailing text).
  (->> (string/split-lines (slurp md-file))
       (keep #(second (re-matches #"#{2,4}\s+`?([a-z0-9][a-z0-9-]*)`?.*" %)))
       set))

(defn -main [corpus-dir div-md & [filter-str]]
  (install-json-ns!)
  (let [files (->> (.listFiles (java.io.File. corpus-dir))
                   (filter #(string/ends-with? (.getName %) ".txt"))
                   (remove #(= "known_gaps.txt" (.getName %)))
                   (sort-by #(.getName %)))
        cases (cond->> (mapcat parse-file files)
                filter-str (filter #(string/includes? (:name %) filter-str)))
        dup-names (->> (frequencies (map :name cases)) (filter #(> (val %) 1)) (map key))
        ids (documented-divergences div-md)
        results (doall (for [c cases] (assoc (check-case c ids) :case c)))
        by (group-by :status results)
        used-ids (set (keep (comp :divergence :case) results))]
    (doseq [{:keys [case why got]} (:fail by)]
      (println (str "FAIL " (:file case) ":" (:line case) " " (:name case) " -- " why))
      (println (str "     program : " (clip (string/join " " (map string/trim (:src case))))))
      (println (str "     expected: " (or (:expected case) (str "error " (:error case)))))
      (when got (println (str "     clojure : " got))))
    ;; What Clojure gives for each confirmed divergence, so the list can be reviewed by eye.
    (when-not (System/getenv "HIDE_DIVERGENCES")
      (doseq [{:keys [case got]} (filter :div (:pass by))]
        (println (str "DIV  " (:name case) " [" (:divergence case) "] ptc: "
                      (or (:expected case) (str "error " (:error case))) " | clojure: " got))))
    (doseq [{:keys [case why]} (:skip by)]
      (println (str "SKIP " (:name case) " -- " why)))
    (doseq [d dup-names] (println (str "DUPLICATE case name: " d)))
    (when-not filter-str
      (doseq [id (sort (remove used-ids ids))]
        (println (str "NOTE divergence rule documented but no case uses it: " id))))
    (println)
    (println (format "%d cases in %d files: %d passed (%d of them confirmed divergences), %d failed, %d skipped (unchecked)%s"
                     (count results) (count files) (count (:pass by)) (count (filter :div (:pass by)))
                     (count (:fail by)) (count (:skip by))
                     (if data-json-available? "" "; clojure.data.json missing, json cases fail")))
    (println (format "%d passed, %d failed" (count (:pass by)) (+ (count (:fail by)) (count dup-names))))
    (shutdown-agents)
    (System/exit (if (and (empty? (:fail by)) (empty? dup-names)) 0 1))))

(apply -main *command-line-args*)
