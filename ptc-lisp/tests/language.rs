//! Language behaviour: each case is a program and the printed result (or error reason) it must give.

use ptc_lisp::{Interpreter, Limits};

fn eval(src: &str) -> Result<String, String> {
    let mut i = Interpreter::new(Limits::default());
    i.eval_str(src)
        .map(|v| v.to_string())
        .map_err(|e| e.reason().to_string())
}

fn check(cases: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (src, want) in cases {
        let got = match eval(src) {
            Ok(v) => v,
            Err(r) => format!("!{r}"),
        };
        if got != *want {
            failures.push(format!("{src}\n   want {want}\n   got  {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing case(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn arithmetic_and_numbers() {
    check(&[
        ("(+ 1 2 3)", "6"),
        ("(/ 10 2)", "5.0"),
        ("(/ 1 0)", "!arithmetic_error"),
        ("(/ 1.0 0)", "##Inf"),
        ("(quot -7 2)", "-3"),
        ("(mod -10 3)", "2"),
        ("(rem -10 3)", "-1"),
        ("(+ 9223372036854775807 1)", "!arithmetic_error"),
        ("(* 1.5 2)", "3.0"),
        ("(max 1 5 3)", "5"),
        ("(min 2 1.5)", "1.5"),
        ("(inc 1.5)", "2.5"),
        ("(abs -3)", "3"),
        ("(round 2.5)", "3"),
        ("(float 1)", "1.0"),
        ("(int 3.9)", "3"),
        ("1e7", "1.0E7"),
        ("0.001", "0.001"),
        ("123456.789", "123456.789"),
        ("-0.5", "-0.5"),
        ("(sqrt 16)", "4.0"),
        ("(+ 1 nil)", "!type_error"),
        ("(= 1 1.0)", "true"),
        ("(== 1 1.0)", "true"),
        ("(bit-and 12 10)", "8"),
    ]);
}

#[test]
fn comparison_never_throws() {
    check(&[
        ("(< 1 2 3)", "true"),
        ("(< 1 3 2)", "false"),
        ("(> 5 nil)", "false"),
        ("(< 1 nil)", "true"),
        ("(< ##NaN 1)", "false"),
        ("(compare \"a\" \"b\")", "-1"),
        ("(compare [1 2] [1])", "1"),
        ("(not= 1 2)", "true"),
    ]);
}

#[test]
fn special_forms_and_macros() {
    check(&[
        ("(let [x 1 y (+ x 1)] y)", "2"),
        ("(if 0 \"t\" \"f\")", "\"t\""),
        ("(if nil \"t\" \"f\")", "\"f\""),
        ("(if-not false 1 2)", "1"),
        ("(when true 1 2)", "2"),
        ("(when-not true 1)", "nil"),
        ("(cond false \"a\" false \"b\" :else \"c\")", "\"c\""),
        ("(case :z :a 1)", "nil"),
        ("(case 2 (1 2) :low 3 :three :other)", ":low"),
        ("(case 1.0 1 :one :other)", ":one"),
        ("(condp = 3 1 :a 2 :b)", "nil"),
        ("(if-some [x false] x :nope)", "false"),
        ("(if-let [x false] x :nope)", ":nope"),
        ("(when-let [[a b] [1 2]] (+ a b))", "3"),
        ("(when-first [x [7 8]] x)", "7"),
        ("(and 1 2 nil 3)", "nil"),
        ("(or nil false 3)", "3"),
        ("(and)", "true"),
        ("(or)", "nil"),
        ("(do 1 2 3)", "3"),
        ("(comment anything (here))", "nil"),
        ("(-> 5 (- 3) (* 2))", "4"),
        ("(->> [1 2 3] (map inc) (reduce +))", "9"),
        ("(cond-> 10 true (- 5) false (* 100))", "5"),
        ("(cond->> 10 true (- 5))", "-5"),
        ("(some-> {:a {:b 2}} :a :b inc)", "3"),
        ("(some->> nil (map inc))", "nil"),
        ("(as-> 1 x (+ x 1) (* x 2))", "4"),
        ("'sym", "sym"),
        ("'observatory/list-traces", "observatory/list-traces"),
        ("(quote (1 2))", "[1 2]"),
        ("#'inc", "#'inc"),
        ("(def x 42)", "#'x"),
        ("(def x 10) (defn twice [n] (* n 2)) (twice x)", "20"),
        ("(defonce y 1) (defonce y 2) y", "1"),
        ("(return 5) 6", "5"),
        ("(fail \"boom\")", "!fail"),
        ("(dotimes [i 3] i)", "nil"),
    ]);
}

#[test]
fn functions_closures_arities() {
    check(&[
        ("((fn [x] (* x x)) 4)", "16"),
        ("(#(+ %1 %2) 1 2)", "3"),
        ("(#(* % 2) 5)", "10"),
        ("(#(apply + %&) 1 2 3)", "6"),
        // `%` and `%1` are one parameter, whichever names the body uses.
        ("(#(+ % %1) 2)", "4"),
        ("(#(vector %1 %1) 3)", "[3 3]"),
        ("(#(vector % %2) 1 2)", "[1 2]"),
        ("(#(vector % %&) 1 2 3)", "[1 [2 3]]"),
        ("(#(inc %) 1 2)", "!arity_error"),
        (
            "(defn f ([x] (f x 10)) ([x y] (+ x y))) [(f 1) (f 1 2)]",
            "[11 3]",
        ),
        (
            "(defn g [a & more] [a more]) [(g 1) (g 1 2 3)]",
            "[[1 nil] [1 [2 3]]]",
        ),
        ("(let [n 5 add (fn [x] (+ x n))] (add 1))", "6"),
        ("(defn make [n] (fn [x] (+ x n))) ((make 3) 4)", "7"),
        (
            "((fn fact [n] (if (<= n 1) 1 (* n (fact (dec n))))) 10)",
            "3628800",
        ),
        (
            "((fn [n acc] (if (> n 0) (recur (dec n) (* acc n)) acc)) 5 1)",
            "120",
        ),
        ("((fn [x] x))", "!arity_error"),
        ("(1 2)", "!not_callable"),
        ("(:a {:a 1})", "1"),
        ("({:a 1} :a)", "1"),
        ("(#{1 2} 2)", "2"),
        ("([10 20] 1)", "20"),
        ("((comp inc inc) 1)", "3"),
        ("((partial + 1 2) 3)", "6"),
        ("(list* 1 2 [3 4])", "[1 2 3 4]"),
        ("(list* [3 4])", "[3 4]"),
        ("((juxt :a :b) {:a 1 :b 2})", "[1 2]"),
        ("((complement even?) 3)", "true"),
        ("((constantly 7) 1 2)", "7"),
        ("((fnil + 0) nil 5)", "5"),
        ("((every-pred odd? pos?) 3 5)", "true"),
        ("((some-fn even? neg?) 3 -1)", "true"),
        ("(apply max 1 [5 3])", "5"),
        ("(loop [i 0] (if (< i 3) (recur (inc i)) i))", "3"),
        (
            "(loop [[x & xs] [1 2 3] acc 0] (if x (recur xs (+ acc x)) acc))",
            "6",
        ),
        (
            "(loop [[a b] [1 2] c (+ a b) n 0] (if (< n 2) (recur [b c] (+ b c) (inc n)) [a b c]))",
            "[3 5 8]",
        ),
        (
            "(letfn [(ev? [n] (if (= n 0) true (od? (dec n)))) (od? [n] (if (= n 0) false (ev? (dec n))))] [(ev? 10) (od? 7)])",
            "[true true]",
        ),
        (
            "(let [k 3] (letfn [(f [x] (* x k))] (mapv f [1 2])))",
            "[3 6]",
        ),
        ("(letfn [(f [x] x)] (f 1)) (f 2)", "!unbound_var"),
        ("(recur 1)", "!invalid_form"),
        ("(loop [i 0] (inc (recur i)))", "!invalid_form"),
    ]);
}

#[test]
fn destructuring() {
    check(&[
        (
            "(let [{:keys [name age] :or {age 0}} {:name \"Bob\"}] age)",
            "0",
        ),
        (
            "(let [[a b & rest] [1 2 3 4 5]] [a b rest])",
            "[1 2 [3 4 5]]",
        ),
        (
            "(let [{:strs [name]} {\"name\" \"Alice\"}] name)",
            "\"Alice\"",
        ),
        ("(let [{a :a [b c] :v} {:a 1 :v [2 3]}] [a b c])", "[1 2 3]"),
        (
            "(let [[_ second :as all] [1 2 3]] [second all])",
            "[2 [1 2 3]]",
        ),
        (
            "(let [{:keys [a] :as m} {:a 1 :b 2}] [a (count m)])",
            "[1 2]",
        ),
        ("(let [[a [b [c]]] [1 [2 [3]]]] (+ a b c))", "6"),
        (
            "(let [{:keys [total-cost]} {\"total_cost\" 3}] total-cost)",
            "3",
        ),
        ("(defn f [{:keys [x y]}] (+ x y)) (f {:x 1 :y 2})", "3"),
        (
            "(map (fn [[k v]] (str k v)) {:a 1 :b 2})",
            "[\":a1\" \":b2\"]",
        ),
        ("(for [[k v] {:a 1 :b 2}] [v k])", "[[1 :a] [2 :b]]"),
        ("(let [[a b] 5] a)", "!destructure_error"),
    ]);
}

#[test]
fn for_and_doseq() {
    check(&[
        (
            "(for [x [1 2 3 4] :when (odd? x) :let [y (* x 10)]] y)",
            "[10 30]",
        ),
        (
            "(for [x [1 2] y [\"a\" \"b\"]] [x y])",
            "[[1 \"a\"] [1 \"b\"] [2 \"a\"] [2 \"b\"]]",
        ),
        ("(for [x [1 2 3 4 5] :while (< x 3)] x)", "[1 2]"),
        (
            "(for [x [1 2] y [1 2 3] :while (<= y x)] [x y])",
            "[[1 1] [2 1] [2 2]]",
        ),
        ("(doseq [x [1 2]] (println x))", "nil"),
    ]);
}

#[test]
fn collections() {
    check(&[
        ("(map + [1 2 3 4] [10 20])", "[11 22]"),
        ("(mapcat (fn [x] [x (* x 2)]) [1 2 3])", "[1 2 2 4 3 6]"),
        ("(reduce - 10 [1 2 3])", "4"),
        ("(reduce + [])", "0"),
        (
            "(reduce-kv (fn [acc k v] (assoc acc k (* v 2))) {} {:a 1 :b 2})",
            "{:a 2 :b 4}",
        ),
        ("(frequencies [:a :b :a :c :b :a])", "{:a 3 :b 2 :c 1}"),
        (
            "(group-by first [[\"a\" 1] [\"a\" 2] [\"b\" 3]])",
            "{\"a\" [[\"a\" 1] [\"a\" 2]] \"b\" [[\"b\" 3]]}",
        ),
        ("(partition 3 3 [0] [1 2 3 4 5])", "[[1 2 3] [4 5 0]]"),
        ("(partition 2 [1 2 3 4 5])", "[[1 2] [3 4]]"),
        ("(partition-all 2 [1 2 3])", "[[1 2] [3]]"),
        ("(partition-by odd? [1 3 2 4 5])", "[[1 3] [2 4] [5]]"),
        ("(update {:n nil} :n (fnil inc 0))", "{:n 1}"),
        (
            "(get-in {:results [{:title \"A\"}]} [:results 0 :title])",
            "\"A\"",
        ),
        ("(assoc-in {} [:a :b] 1)", "{:a {:b 1}}"),
        ("(update-in {:a {:b 1}} [:a :b] + 10)", "{:a {:b 11}}"),
        ("(merge-with + {:a 1 :b 2} {:a 3 :c 4})", "{:a 4 :b 2 :c 4}"),
        ("(merge {:a 1} nil {:b 2})", "{:a 1 :b 2}"),
        ("(select-keys {:a 1 :b 2 :c 3} [:a :c])", "{:a 1 :c 3}"),
        ("(keys {:b 2 :a 1})", "[:a :b]"),
        ("(vals {:b 2 :a 1})", "[1 2]"),
        ("(keys {})", "nil"),
        ("(dissoc {:a 1 :b 2} :a)", "{:b 2}"),
        ("(conj [1 2] 3 4)", "[1 2 3 4]"),
        ("(conj {:a 1} [:b 2])", "{:a 1 :b 2}"),
        ("(conj #{1} 2)", "#{1 2}"),
        ("(conj nil 1)", "[1]"),
        ("(cons 0 [1 2])", "[0 1 2]"),
        ("(into [] #{3 1 2})", "[1 2 3]"),
        ("(into {} [[:a 1] [:b 2]])", "{:a 1 :b 2}"),
        ("(into #{} [1 1 2])", "#{1 2}"),
        ("(first [])", "nil"),
        ("(rest [1])", "[]"),
        ("(next [1])", "nil"),
        ("(last [1 2 3])", "3"),
        ("(butlast [1 2 3])", "[1 2]"),
        ("(nth [1 2 3] 10)", "nil"),
        ("(nth [1 2 3] 10 :x)", ":x"),
        ("(count \"héllo\")", "5"),
        ("(count {:a 1})", "1"),
        ("(empty? [])", "true"),
        ("(seq [])", "nil"),
        ("(contains? {:a 1} :a)", "true"),
        ("(contains? [1 2] 1)", "true"),
        ("(take 2 [1 2 3])", "[1 2]"),
        ("(drop 2 [1 2 3])", "[3]"),
        ("(take-while odd? [1 3 4 5])", "[1 3]"),
        ("(drop-while odd? [1 3 4 5])", "[4 5]"),
        ("(take-last 2 [1 2 3])", "[2 3]"),
        ("(split-at 1 [1 2 3])", "[[1] [2 3]]"),
        ("(sort [3 1 2])", "[1 2 3]"),
        ("(sort > [3 1 2])", "[3 2 1]"),
        ("(sort :desc [1 3 2])", "[3 2 1]"),
        (
            "(sort-by :cost > [{:cost 1} {:cost 3}])",
            "[{:cost 3} {:cost 1}]",
        ),
        (
            "(sort-by count [\"ccc\" \"a\" \"bb\"])",
            "[\"a\" \"bb\" \"ccc\"]",
        ),
        (
            "(sort-by first [[2 :a] [1 :b] [2 :c] [1 :d]])",
            "[[1 :b] [1 :d] [2 :a] [2 :c]]",
        ),
        ("(reverse [1 2 3])", "[3 2 1]"),
        ("(distinct [1 2 1 3 2])", "[1 2 3]"),
        ("(dedupe [1 1 2 1])", "[1 2 1]"),
        ("(interleave [1 2] [:a :b])", "[1 :a 2 :b]"),
        ("(interpose \",\" [1 2 3])", "[1 \",\" 2 \",\" 3]"),
        ("(flatten [1 [2 [3 4]] 5])", "[1 2 3 4 5]"),
        ("(range 5)", "[0 1 2 3 4]"),
        ("(range 1 10 3)", "[1 4 7]"),
        ("(range 5 0 -2)", "[5 3 1]"),
        ("(range)", "!arity_error"),
        ("(repeat 3 :x)", "[:x :x :x]"),
        ("(zipmap [:a :b] [1 2])", "{:a 1 :b 2}"),
        ("(some even? [1 3 4])", "true"),
        ("(every? odd? [1 3])", "true"),
        ("(keep #(when (odd? %) (* % 10)) [1 2 3])", "[10 30]"),
        ("(map-indexed vector [:a :b])", "[[0 :a] [1 :b]]"),
        ("(max-key count \"a\" \"abc\" \"ab\")", "\"abc\""),
        ("(vec #{1})", "[1]"),
        ("(peek [1 2])", "2"),
        ("(pop [1 2])", "[1]"),
        ("(subvec [1 2 3 4] 1 3)", "[2 3]"),
        ("(tree-seq vector? identity [1 [2]])", "[[1 [2]] 1 [2] 2]"),
        (
            "(postwalk #(if (number? %) (inc %) %) {:a [1 2]})",
            "{:a [2 3]}",
        ),
        ("(update-vals {:a 1 :b 2} inc)", "{:a 2 :b 3}"),
        ("(update-keys {:a 1} name)", "{\"a\" 1}"),
        ("(reductions + [1 2 3])", "[1 3 6]"),
        ("(into #{} (map :a) [{:a 1} {:a 2} {:a 1}])", "#{1 2}"),
        (
            "(into [] (comp (map inc) (filter odd?)) [1 2 3 4])",
            "[3 5]",
        ),
        ("(transduce (map inc) + 0 [1 2 3])", "9"),
        (
            "(sequence (comp (filter odd?) (take 2)) [1 2 3 5 7])",
            "[1 3]",
        ),
        ("((comp str inc) 1)", "\"2\""),
    ]);
}

#[test]
fn flexible_keys_and_signals() {
    check(&[
        ("(:status {\"status\" \"ok\"})", "\"ok\""),
        ("(:total-cost {\"total_cost\" 3})", "3"),
        ("(get {:a 1} \"a\")", "1"),
        ("(get {:a 1 \"a\" 2} :a)", "1"),
        ("(parse-long \"abc\")", "nil"),
        ("(parse-long \"42\")", "42"),
        ("(parse-double \"1.5\")", "1.5"),
        ("(subs \"abc\" 9)", "\"\""),
        ("(json/parse-string \"not json\")", "nil"),
    ]);
}

#[test]
fn strings_and_regex() {
    check(&[
        ("(str nil \"x\" 1 :k)", "\"x1:k\""),
        ("(str [1 \"a\"])", "\"[1 \\\"a\\\"]\""),
        ("(format \"%.2f\" 3.14159)", "\"3.14\""),
        ("(format \"%s has %d\" \"x\" 3)", "\"x has 3\""),
        ("(format \"%5d|%-3s|\" 42 \"a\")", "\"   42|a  |\""),
        ("(clojure.string/join \", \" [1 2])", "\"1, 2\""),
        ("(str/split \"a,b,c\" #\",\")", "[\"a\" \"b\" \"c\"]"),
        ("(str/split \"a--b\" \"--\")", "!type_error"),
        ("(str/upper-case \"abc\")", "\"ABC\""),
        ("(clojure.string/reverse \"abc\")", "\"cba\""),
        ("(str/replace \"a-b-c\" \"-\" \"_\")", "\"a_b_c\""),
        ("(str/replace \"a1b22\" #\"\\d+\" \"#\")", "\"a#b#\""),
        ("(str/replace \"ab\" #\"(a)(b)\" \"$2$1\")", "\"ba\""),
        ("(str/trim \"  x \")", "\"x\""),
        ("(str/blank? \"  \")", "true"),
        ("(str/includes? \"hello\" \"ell\")", "true"),
        ("(str/starts-with? \"hello\" \"he\")", "true"),
        ("(str/index-of \"hello\" \"l\")", "2"),
        ("(str/split-lines \"a\\nb\\n\")", "[\"a\" \"b\"]"),
        ("(subs \"hello\" 1 3)", "\"el\""),
        ("(name :a)", "\"a\""),
        ("(name :ns/a)", "\"a\""),
        ("(namespace :ns/a)", "\"ns\""),
        ("(keyword \"x\")", ":x"),
        ("(re-find #\"\\d+\" \"ab12cd\")", "\"12\""),
        (
            "(re-find #\"(\\d+)-(\\d+)\" \"a 12-34\")",
            "[\"12-34\" \"12\" \"34\"]",
        ),
        ("(re-matches #\"\\d+\" \"123\")", "\"123\""),
        ("(re-matches #\"\\d+\" \"123a\")", "nil"),
        ("(re-seq #\"\\d\" \"a1b2\")", "[\"1\" \"2\"]"),
        ("(count (filter #(= \\r %) \"raspberry\"))", "3"),
        (
            "(filter #(contains? #{\\a \\e \\i \\o \\u} %) \"hello\")",
            "[\"e\" \"o\"]",
        ),
        ("(= \\a \"a\")", "true"),
        ("(pr-str {:b 2 :a 1})", "\"{:a 1 :b 2}\""),
        ("(pr-str \"a\")", "\"\\\"a\\\"\""),
    ]);
}

#[test]
fn java_date_time_interop() {
    check(&[
        ("(LocalDate/parse \"2024-02-28\")", "\"2024-02-28\""),
        (
            "(.plusDays (LocalDate/parse \"2024-02-28\") 2)",
            "\"2024-03-01\"",
        ),
        ("(.minusDays \"2024-01-01\" 1)", "\"2023-12-31\""),
        // An instant shifts by whole days and stays an instant.
        (
            "(.plusDays \"2024-02-28T10:00:00Z\" 2)",
            "\"2024-03-01T10:00:00Z\"",
        ),
        ("(LocalDate/parse \"2024-02-30\")", "nil"),
        ("(.toEpochDay \"1970-01-02\")", "1"),
        (
            "(Instant/parse \"2024-01-15T12:30:00.5+01:00\")",
            "\"2024-01-15T11:30:00.500Z\"",
        ),
        (
            "(.toMinutes (Duration/between \"2024-01-15T10:00:00Z\" \"2024-01-15T11:30:00Z\"))",
            "90",
        ),
        (
            "(.isBefore \"2024-01-15T10:00:00Z\" \"2024-01-15T10:00:01Z\")",
            "true",
        ),
        ("(.isAfter \"2024-03-01\" \"2024-02-29\")", "true"),
        ("(java.util.Date. 86400000)", "\"1970-01-02T00:00:00Z\""),
        ("(.getTime \"1970-01-01T00:00:01Z\")", "1000"),
    ]);
}

#[test]
fn sets() {
    check(&[
        ("#{3 1 2}", "#{1 2 3}"),
        ("(clojure.set/union #{1} #{2})", "#{1 2}"),
        ("(clojure.set/intersection #{1 2} #{2 3})", "#{2}"),
        ("(clojure.set/difference #{1 2} #{2})", "#{1}"),
        ("(disj #{1 2} 1)", "#{2}"),
        ("(set [1 1 2])", "#{1 2}"),
        ("(contains? #{1} 1)", "true"),
        ("(clojure.set/map-invert {:a 1})", "{1 :a}"),
        ("(clojure.set/rename-keys {:a 1} {:a :b})", "{:b 1}"),
        ("(clojure.set/subset? #{1} #{1 2})", "true"),
    ]);
}

#[test]
fn ptc_extensions() {
    check(&[
        ("(sum [1 2 3])", "6"),
        ("(sum [])", "0"),
        ("(avg [])", "nil"),
        ("(avg [1 2])", "1.5"),
        (
            "(sum-by :amount [{:amount 10} {:amount nil} {:other 5}])",
            "10",
        ),
        (
            "(avg-by :amount [{:amount 10} {:amount nil} {:amount 20}])",
            "15.0",
        ),
        ("(sum-by :a [{:a \"x\"}])", "!arithmetic_error"),
        ("(min-by :c [{:c 3} {:c 1}])", "{:c 1}"),
        ("(max-by :c [{:c 3} {:c 1}])", "{:c 3}"),
        (
            "(distinct-by :k [{:k 1 :v 1} {:k 1 :v 2} {:k 2 :v 3}])",
            "[{:k 1 :v 1} {:k 2 :v 3}]",
        ),
        ("(combinations [1 2 3] 2)", "[[1 2] [1 3] [2 3]]"),
        (
            "(json/parse-lines \"{\\\"a\\\":1}\\n\\nnull\\nnot json\")",
            "[{\"a\" 1} nil nil]",
        ),
        ("(pcalls #(+ 1 1) #(* 2 3) #(- 10 5))", "[2 6 5]"),
        ("(let [f 10] (pmap #(* % f) [1 2 3]))", "[10 20 30]"),
        ("(pmap (fn [x] (return x)) [1])", "!invalid_form"),
    ]);
}

#[test]
fn errors_carry_reason_position_and_hint() {
    let mut i = Interpreter::new(Limits::default());
    let e = i.eval_str("(let [x 1]\n  (fitler odd? [x]))").unwrap_err();
    assert_eq!(e.reason(), "unbound_var");
    assert_eq!(e.hint(), Some("did you mean filter?"));
    let p = e.pos().unwrap();
    assert_eq!((p.line, p.col), (2, 4));
    let e = i.eval_str("(get)").unwrap_err();
    assert_eq!(e.reason(), "arity_error");
    assert!(
        e.message().contains("get expects 2 or 3"),
        "{}",
        e.message()
    );
    let e = i.eval_str("(+ 1 :a)").unwrap_err();
    assert!(
        e.message().contains("+") && e.message().contains(":a"),
        "{}",
        e.message()
    );
    let e = i.eval_str("(+ 1 (:missing {}))").unwrap_err();
    assert!(e.hint().is_some_and(|h| h.contains("nil")), "{e}");
    let e = i.eval_str("(iterate inc 0)").unwrap_err();
    assert_eq!(e.reason(), "unbound_var");
    assert!(e.hint().is_some_and(|h| h.contains("eager")), "{e}");
    let e = i.eval_str("(foo/bar 1)").unwrap_err();
    assert_eq!(e.reason(), "unbound_var");
    assert!(e.message().contains("known namespaces"), "{}", e.message());
    let e = i.eval_str("(+ 1").unwrap_err();
    assert_eq!(e.reason(), "parse_error");
    // Found by the read fuzzer: keywords with inner colons cannot print and read back.
    assert_eq!(i.eval_str(":a:b").unwrap_err().reason(), "parse_error");
    let e = i.eval_str("(fail {:code 7})").unwrap_err();
    assert_eq!(e.reason(), "fail");
    assert_eq!(
        e.value().map(|v| v.to_string()),
        Some("{:code 7}".to_string())
    );
}

#[test]
fn definitions_persist_and_println_is_captured() {
    let mut i = Interpreter::new(Limits::default());
    i.eval_str("(def base 10) (defn add [x] (+ x base))")
        .unwrap();
    assert_eq!(
        i.eval_str("(println \"sum\" (add 5)) (add 1)")
            .unwrap()
            .to_string(),
        "11"
    );
    assert_eq!(i.take_output(), "sum 15\n");
    i.eval_str("(doc map)").unwrap();
    assert!(i.take_output().contains("(map f coll"));
}

#[test]
fn result_history_is_kept_in_star_vars() {
    let mut i = Interpreter::new(Limits::default());
    i.eval_str("(+ 1 1)").unwrap();
    i.eval_str("[:b]").unwrap();
    i.eval_str("\"c\"").unwrap();
    assert_eq!(
        i.eval_str("[*1 *2 *3]").unwrap().to_string(),
        "[\"c\" [:b] 2]"
    );
}

#[test]
fn context_data_namespace() {
    let mut i = Interpreter::new(Limits::default());
    i.set_context(ptc_lisp::read_value("{\"orders\" [{\"total\" 30} {\"total\" 10}]}").unwrap());
    let v = i
        .eval_str("(->> data/orders (filter #(> (:total %) 20)) (map :total) (reduce + 0))")
        .unwrap();
    assert_eq!(v.to_string(), "30");
    assert_eq!(
        i.eval_str("data/missing").unwrap_err().reason(),
        "unbound_var"
    );
}

#[test]
fn accumulators_stay_uniquely_owned() {
    // A copy per step would make these quadratic; with in-place updates they finish quickly
    // inside the step budget below (which a quadratic run would also pass, so check the result
    // and rely on the benchmark for speed): the point here is correctness of the move analysis.
    check(&[
        ("(count (reduce conj [] (range 20000)))", "20000"),
        ("(let [v [1 2]] [(conj v 3) v])", "[[1 2 3] [1 2]]"),
        (
            "(let [m {:a 1} m2 (assoc m :b 2)] [m m2])",
            "[{:a 1} {:a 1 :b 2}]",
        ),
        (
            "(loop [acc [] i 0] (if (< i 3) (recur (conj acc i) (inc i)) [acc (count acc)]))",
            "[[0 1 2] 3]",
        ),
        ("(let [xs [1 2]] (for [x xs y xs] (+ x y)))", "[2 3 3 4]"),
        (
            "(let [base [1]] (loop [i 0 acc []] (if (< i 2) (recur (inc i) (conj acc (conj base i))) acc)))",
            "[[1 0] [1 1]]",
        ),
        (
            "(let [v [1] f (fn [] v)] [(conj v 2) (f) v])",
            "[[1 2] [1] [1]]",
        ),
        ("((fn [m] (assoc m :n (count m))) {:a 1})", "{:a 1 :n 1}"),
        ("((fn [m] (if (empty? m) m (assoc m :a 1))) {})", "{}"),
        ("((fn [m] (if (empty? m) (assoc m :a 1) m)) {})", "{:a 1}"),
        (
            "(let [m {:a 1}] (cond (:b m) m :else (assoc m :b 2)))",
            "{:a 1 :b 2}",
        ),
        ("(let [v [1]] (case 1 1 (conj v 2) 2 v))", "[1 2]"),
        ("(let [v [1]] (and (conj v 2) v))", "[1]"),
        ("(let [v [1]] [(or nil (conj v 2)) v])", "[[1 2] [1]]"),
        (
            "(defn f [acc n] (if (zero? n) acc (recur (conj acc n) (dec n)))) [(f [] 3) (f [0] 1)]",
            "[[3 2 1] [0 1]]",
        ),
        (
            "(let [m {:a [1]}] [(update m :a conj 2) m])",
            "[{:a [1 2]} {:a [1]}]",
        ),
        (
            "(let [m {:a {:b 1}}] [(assoc-in m [:a :c] 2) m])",
            "[{:a {:b 1 :c 2}} {:a {:b 1}}]",
        ),
        (
            "(let [m {:a {:b [1]}}] [(update-in m [:a :b] conj 2) m])",
            "[{:a {:b [1 2]}} {:a {:b [1]}}]",
        ),
        (
            "(let [s #{1}] [(conj s 2) (disj s 1) s])",
            "[#{1 2} #{} #{1}]",
        ),
        (
            "(let [v [1 2 3]] [(pop v) v (assoc v 0 9) v])",
            "[[1 2] [1 2 3] [9 2 3] [1 2 3]]",
        ),
        (
            "(let [m {}] (loop [i 0 acc m] (if (< i 2) (recur (inc i) (assoc acc i m)) acc)))",
            "{0 {} 1 {}}",
        ),
    ]);
}

/// Two-operand arithmetic and comparisons read operands that are constants, locals or keyword
/// lookups in place, and evaluate any other operand first. Both paths must answer alike: every
/// operator over every pair of operand kinds, once with both operands read in place (locals,
/// a map's entries, a missing key) and once computed (`identity`), must agree, error or not.
#[test]
fn operands_read_in_place_answer_as_computed_ones() {
    let operands = [
        "nil",
        "1",
        "-1",
        "9223372036854775807",
        "2.5",
        "##NaN",
        "\"a\"",
        "\"b\"",
        ":k",
        "[1 2]",
        "{:a 1}",
        "#{1}",
    ];
    let ops = ["=", "==", "<", ">", "<=", ">=", "+", "-", "*", "not="];
    let mut failures = Vec::new();
    let mut compared = 0;
    for op in ops {
        for x in operands {
            for y in operands {
                let in_place = [
                    format!("(let [x {x} y {y}] ({op} x y))"),
                    format!("(let [m {{:x {x} :y {y}}}] ({op} (:x m) (:y m)))"),
                    format!("(let [m {{\"x\" {x}}} y {y}] ({op} (:x m) y))"),
                    format!("({op} {x} (:y {{:y {y}}}))"),
                ];
                let computed = format!("({op} (identity {x}) (identity {y}))");
                let want = eval(&computed);
                for src in &in_place {
                    compared += 1;
                    let got = eval(src);
                    if got != want {
                        failures.push(format!("{src}: {got:?}, computed {want:?}"));
                    }
                }
            }
        }
        // One side missing: a keyword lookup of an absent key reads as nil.
        let got = eval(&format!("(let [m {{:a 1}}] ({op} (:absent m) nil))"));
        assert_eq!(
            got,
            eval(&format!("({op} (identity nil) (identity nil))")),
            "{op}"
        );
    }
    assert_eq!(compared, ops.len() * operands.len() * operands.len() * 4);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // inc/dec read their one operand in place too.
    check(&[
        ("(let [x 1] (inc x))", "2"),
        ("(let [m {:n 2.5}] (dec (:n m)))", "1.5"),
        ("(let [x 9223372036854775807] (inc x))", "!arithmetic_error"),
        ("(let [m {:n \"a\"}] (inc (:n m)))", "!type_error"),
        ("(let [m {}] (inc (:n m)))", "!type_error"),
    ]);
}

/// `update` changes an exact key where it lies and calls `f` with 0, 1 or more extra
/// arguments; the map it was given is left as it was (values are persistent).
#[test]
fn update_in_place_keeps_values_persistent() {
    check(&[
        ("(update {:a 1} :a inc)", "{:a 2}"),
        ("(update {:a 1} :a + 10)", "{:a 11}"),
        ("(update {:a 1} :a + 10 100)", "{:a 111}"),
        ("(update {:a 1} :a + 1 2 3 4)", "{:a 11}"),
        (
            "(let [m {:a 1} n (update m :a inc)] [m n])",
            "[{:a 1} {:a 2}]",
        ),
        ("(update {:a 1} :b (fnil inc 0))", "{:a 1 :b 1}"),
        ("(update {\"a\" 1} :a inc)", "{\"a\" 1 :a 2}"),
        ("(update {:a \"x\"} :a inc)", "!type_error"),
        (
            "(reduce (fn [m k] (update m k (fnil inc 0))) {} [:a :b :a])",
            "{:a 2 :b 1}",
        ),
    ]);
}

#[test]
fn the_reader_refuses_what_it_does_not_read_with_its_reason() {
    let cases = [
        (")", "unmatched delimiter `)`"),
        ("]", "unmatched delimiter `]`"),
        ("}", "unmatched delimiter `}`"),
        ("`(a)", "syntax quote is not supported (no macros)"),
        ("~a", "unquote is not supported (no macros)"),
        ("@a", "deref `@` is not supported (no atoms)"),
        ("^{:a 1} b", "metadata `^` is not supported"),
        (":", "invalid keyword `:`"),
        (":a:b", "invalid keyword `:a:b`"),
        (":a/", "invalid keyword `:a/`"),
        (":/", "invalid keyword `:/`"),
        (":/a", "invalid keyword `:/a`"),
    ];
    let mut i = Interpreter::new(Limits::default());
    for (src, message) in cases {
        let e = i.eval_str(src).unwrap_err();
        assert_eq!(e.reason(), "parse_error", "{src}");
        assert_eq!(e.message(), message, "{src}");
    }
    // Keywords a namespace qualifies read.
    assert_eq!(i.eval_str(":a/b").unwrap().to_string(), ":a/b");
    assert_eq!(i.eval_str("::a").unwrap().to_string(), ":a");
}
