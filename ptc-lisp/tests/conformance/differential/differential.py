#!/usr/bin/env python3
"""Random differential testing of PTC-Lisp against Clojure.

Generates random programs, evaluates each with the `ptc` CLI, and writes them as a corpus
file whose expected results are PTC-Lisp's answers. Running the Clojure check on that
directory then lists every program where Clojure disagrees:

    cargo build -p ptc-cli
    python3 ptc-lisp/tests/conformance/differential/differential.py \
        --ptc target/debug/ptc --out /tmp/diff --seed 1 --count 1000
    CORPUS_DIR=/tmp/diff ptc-lisp/tests/conformance/check_with_clojure.sh

The generators stay inside the part of the language where PTC-Lisp and Clojure agree
(integers rather than floats mixed with integers, no `/`, no printing of lazy seqs, maps
only iterated through order-independent operations), so a disagreement is a conformance bug
or a missing divergence rule (cases listed in known_gaps.txt show up here too). Disagreements
found this way become ordinary corpus cases.

Kinds (--kind): core (integers, vectors, sets, keyword maps, strings), records (trace-like
records, regex, format, control flow, destructuring), strings (clojure.string and regex over
random text), colls (partition/split/nested vectors), json (json/parse-string of random
documents), or all of them mixed.
"""
import argparse
import json
import os
import random
import subprocess

R = random.Random(1)


def pick(xs):
    return R.choice(xs)


# --- "core" programs: integers, vectors, sets, keyword maps, strings --------------------
PRED = ["even?", "odd?", "pos?", "neg?", "zero?", "#(> % 3)", "#(< % 0)", "#(= 0 (mod % 3))"]
F1 = ["inc", "dec", "-", "#(* % 2)", "#(mod % 3)", "abs", "#(- 10 %)", "#(quot % 2)"]
SEPS = ['","', '""', '" "']
KWS = [":a", ":b", ":c", ":d"]
STRS = ['"a"', '"bc"', '"Hello"', '" x y "', '""', '"a,b,c"', '"banana"', '"ZZ"']

def int_e(d):
    if d <= 0 or R.random() < 0.25:
        return str(R.randint(-5, 20))
    c = R.randint(0, 21)
    if c == 0: return f"(+ {int_e(d-1)} {int_e(d-1)})"
    if c == 1: return f"(- {int_e(d-1)} {int_e(d-1)})"
    if c == 2: return f"(* {int_e(d-1)} {int_e(d-1)})"
    if c == 3: return f"({pick(['inc','dec','abs','-'])} {int_e(d-1)})"
    if c == 4: return f"(count {vec_e(d-1)})"
    if c == 5: return f"({pick(['quot','mod','rem'])} {int_e(d-1)} {pick(['2','3','-4','7'])})"
    if c == 6: return f"({pick(['max','min'])} {int_e(d-1)} {int_e(d-1)} {int_e(d-1)})"
    if c == 7: return f"(reduce + 0 {vec_e(d-1)})"
    if c == 8: return f"(apply + {vec_e(d-1)})"
    # `get`/`conj` on a sequence result is a documented divergence (eager-vectors): wrap in vec.
    if c == 9: return f"(get (vec {vec_e(d-1)}) {int_e(d-1)} -1)"
    if c == 10: return f"(nth {vec_e(d-1)} {R.randint(0,3)} 99)"
    if c == 11: return f"(count {str_e(d-1)})"
    if c == 12: return f"({pick(['bit-and','bit-or','bit-xor'])} {int_e(d-1)} {int_e(d-1)})"
    if c == 13: return f"(compare {int_e(d-1)} {int_e(d-1)})"
    if c == 14: return f"(get {map_e(d-1)} {pick(KWS)} 0)"
    if c == 15: return f"(or (first {vec_e(d-1)}) 0)"
    if c == 16: return f"(or (last {vec_e(d-1)}) 0)"
    if c == 17: return f"(reduce max 0 {vec_e(d-1)})"
    if c == 18: return f"(if {bool_e(d-1)} {int_e(d-1)} {int_e(d-1)})"
    if c == 19: return f"(let [x {int_e(d-1)}] (+ x x))"
    if c == 20: return f"(count (filter {pick(PRED)} {vec_e(d-1)}))"
    return f"(reduce (fn [a b] (- a b)) {vec_e(d-1)})"

def bool_e(d):
    c = R.randint(0, 11)
    if d <= 0 or c == 0: return pick(["true", "false", "nil"])
    if c == 1: return f"(= {int_e(d-1)} {int_e(d-1)})"
    if c == 2: return f"({pick(['<','>','<=','>='])} {int_e(d-1)} {int_e(d-1)})"
    if c == 3: return f"({pick(PRED)} {int_e(d-1)})"
    if c == 4: return f"(empty? {vec_e(d-1)})"
    if c == 5: return f"(contains? {set_e(d-1)} {int_e(d-1)})"
    if c == 6: return f"({pick(['every?','some','not-any?','not-every?'])} {pick(PRED)} {vec_e(d-1)})"
    if c == 7: return f"(not {bool_e(d-1)})"
    if c == 8: return f"({pick(['and','or'])} {bool_e(d-1)} {bool_e(d-1)})"
    if c == 9: return f"(clojure.string/includes? {str_e(d-1)} {pick(STRS)})"
    if c == 10: return f"(= {vec_e(d-1)} {vec_e(d-1)})"
    return f"(contains? {map_e(d-1)} {pick(KWS)})"

def vec_lit():
    return "[" + " ".join(str(R.randint(-3, 9)) for _ in range(R.randint(0, 6))) + "]"

def vec_e(d):
    if d <= 0 or R.random() < 0.2: return vec_lit()
    c = R.randint(0, 33)
    v = lambda: vec_e(d-1)
    if c == 0: return f"(map {pick(F1)} {v()})"
    if c == 1: return f"(filter {pick(PRED)} {v()})"
    if c == 2: return f"(remove {pick(PRED)} {v()})"
    if c == 3: return f"({pick(['take','drop','take-last','drop-last'])} {R.randint(0,4)} {v()})"
    if c == 4: return f"(sort {v()})"
    if c == 5: return f"(sort > {v()})"
    if c == 6: return f"(reverse {v()})"
    if c == 7: return f"(distinct {v()})"
    if c == 8: return f"(concat {v()} {v()})"
    if c == 9: return f"(conj (vec {v()}) {int_e(d-1)})"
    if c == 10: return f"(cons {int_e(d-1)} {v()})"
    if c == 11: return f"(rest {v()})"
    if c == 12: return f"(range {R.randint(-2,3)} {R.randint(0,8)})"
    if c == 13: return f"(mapcat (fn [x] [x x]) {v()})"
    if c == 14: return f"({pick(['take-while','drop-while'])} {pick(PRED)} {v()})"
    if c == 15: return f"(sort-by {pick(F1)} {v()})"
    if c == 16: return f"(dedupe {v()})"
    if c == 17: return f"(flatten [{v()} [{v()}]])"
    if c == 18: return f"(interleave {v()} {v()})"
    if c == 19: return f"(map-indexed (fn [i x] (+ i x)) {v()})"
    if c == 20: return f"(keep #(when ({pick(PRED)} %) (* % 10)) {v()})"
    if c == 21: return f"(into [] {v()})"
    if c == 22: return f"(mapv {pick(F1)} {v()})"
    if c == 23: return f"(for [x {v()} :when ({pick(PRED)} x)] ({pick(F1)} x))"
    if c == 24: return f"(map + {v()} {v()})"
    if c == 25: return f"(vec (sort (set {v()})))"
    if c == 26: return f"(sort (keys {map_e(d-1)}))".replace("(sort (keys", "(sort (map (comp count name) (keys")+")"
    if c == 27: return f"(map count (partition-all {R.randint(1,3)} {v()}))"
    if c == 28: return f"(map first (partition {R.randint(1,3)} {v()}))"
    if c == 29: return f"(map count (partition-by {pick(PRED)} {v()}))"
    if c == 30: return f"(let [xs {v()}] (map - xs (rest xs)))"
    if c == 31: return f"(->> {v()} (map {pick(F1)}) (filter {pick(PRED)}))"
    if c == 32: return f"(map (fn [[k n]] (* k n)) (sort (frequencies {v()})))"
    return f"(sort-by identity > {v()})"

def set_e(d):
    if d <= 0 or R.random() < 0.4:
        return "#{" + " ".join(str(x) for x in sorted(set(R.randint(-3, 9) for _ in range(R.randint(0, 4))))) + "}"
    c = R.randint(0, 4)
    if c == 0: return f"(set {vec_e(d-1)})"
    if c == 1: return f"(conj {set_e(d-1)} {int_e(d-1)})"
    if c == 2: return f"(disj {set_e(d-1)} {int_e(d-1)})"
    if c == 3: return f"(clojure.set/{pick(['union','intersection','difference'])} {set_e(d-1)} {set_e(d-1)})"
    return f"(into #{{}} {vec_e(d-1)})"

def map_e(d):
    if d <= 0 or R.random() < 0.3:
        ks = R.sample(KWS, R.randint(0, 3))
        return "{" + " ".join(f"{k} {R.randint(0,9)}" for k in ks) + "}"
    c = R.randint(0, 9)
    m = lambda: map_e(d-1)
    if c == 0: return f"(assoc {m()} {pick(KWS)} {int_e(d-1)})"
    if c == 1: return f"(dissoc {m()} {pick(KWS)})"
    if c == 2: return f"(merge {m()} {m()})"
    if c == 3: return f"(merge-with + {m()} {m()})"
    if c == 4: return f"(select-keys {m()} [{pick(KWS)} {pick(KWS)}])"
    if c == 5: return f"(zipmap [{' '.join(R.sample(KWS, 3))}] {vec_e(d-1)})"
    if c == 6: return f"(update-vals {m()} {pick(F1)})"
    if c == 7: return f"(update {m()} {pick(KWS)} (fnil inc 0))"
    if c == 8: return f"(into {{}} (filter (fn [[k v]] ({pick(PRED)} v)) {m()}))"
    return f"(reduce-kv (fn [acc k v] (assoc acc k (* 2 v))) {{}} {m()})"

def str_e(d):
    if d <= 0 or R.random() < 0.3: return pick(STRS)
    c = R.randint(0, 10)
    if c == 0: return f"(str {str_e(d-1)} {int_e(d-1)})"
    if c == 1: return f"(clojure.string/upper-case {str_e(d-1)})"
    if c == 2: return "(clojure.string/join " + pick(SEPS) + " " + vec_e(d-1) + ")"
    if c == 3: return f"(clojure.string/trim {str_e(d-1)})"
    if c == 4: return f"(apply str (reverse {str_e(d-1)}))"
    if c == 5: return f"(clojure.string/replace {str_e(d-1)} \"a\" \"o\")"
    if c == 6: return f"(pr-str (vec {vec_e(d-1)}))"
    if c == 7: return f"(str (vec {vec_e(d-1)}))"
    if c == 8: return f"(format \"%d-%s\" {int_e(d-1)} {str_e(d-1)})"
    if c == 9: return f"(clojure.string/join \"|\" (clojure.string/split {str_e(d-1)} #\",\"))"
    return f"(clojure.string/lower-case {str_e(d-1)})"

CORE_GENS = [int_e, bool_e, vec_e, set_e, map_e, str_e]


def core_program():
    return R.choice(CORE_GENS)(R.randint(1, 4))


# --- "records" programs: trace-like records, strings, regex, control flow ------------
# Inputs for the split/regex/format/case generators below.
NAMES = ['"ann"', '"bob"', '"cy"', '"dee"', '"Ed"']
STATUS = ['"ok"', '"error"', '"slow"']
C0 = ['\"a b  c\"', '\"x,y,,z\"', '\" lead\"', '\"one\"']
C1 = ['#\" +\"', '#\",\"', '#\"\\\\s\"']
C2 = ['\"ab1 cd22 e\"', '\"X y2\"', '\"\"', '\"q9q9\"']
C3 = ['\"id-42 x-1\"', '\"none\"', '\"a-b-3\"']
C4 = ['\"a.b.c\"', '\"aaa\"', '\"a-1-b-22\"']
C5 = [':a', ':b', '1', '\"s\"', 'nil']
C6 = ['true', 'nil', ':k', '\"s\"']


def rec():
    return "{:id %d :name %s :status %s :cost %s :tags [%s]}" % (
        R.randint(1, 9), pick(NAMES), pick(STATUS), pick(["1.5", "2.25", "0.5", "3.0", "10.75", "0.375"]),
        " ".join(pick(['"x"', '"y"', '"z"']) for _ in range(R.randint(0, 3))))


def recs():
    return "[" + " ".join(rec() for _ in range(R.randint(0, 5))) + "]"
KEY = [":id", ":name", ":status", ":cost"]


def records_program():
    c = R.randint(0, 39)  # 36 (reduce-kv over a map) is left out: sorted-map-seq
    rs = recs()
    k = pick(KEY)
    if c == 0: return f"(mapv :name (sort-by {k} {rs}))"
    if c == 1: return f"(mapv :id (sort-by {k} > {rs}))" if k in (":id", ":cost") else f"(mapv :id (sort-by {k} {rs}))"
    if c == 2: return f"(update-vals (group-by :status {rs}) count)"
    if c == 3: return f"(update-vals (group-by :status {rs}) #(reduce + (map :cost %)))"
    if c == 4: return f"(frequencies (mapcat :tags {rs}))"
    if c == 5: return f"(reduce + 0 (map :cost {rs}))"
    if c == 6: return f"(into {{}} (map (juxt :id :name) {rs}))"
    if c == 7: return f"(mapv #(select-keys % [:id {k}]) (filter #(= \"ok\" (:status %)) {rs}))"
    if c == 8: return f"(let [rs {rs}] (when (seq rs) (apply max-key :cost rs)))"
    if c == 9: return f"(vec (for [{{:keys [id tags]}} {rs} t tags] [id t]))"
    if c == 10: return f"(count (distinct (map :name {rs})))"
    if c == 11: return f"(->> {rs} (map :name) (map clojure.string/upper-case) sort (clojure.string/join \",\"))"
    if c == 12: return f"(reduce (fn [m {{:keys [status cost]}}] (update m status (fnil + 0) cost)) {{}} {rs})"
    if c == 13: return f"(mapv #(update % :cost * 2) (take 2 {rs}))"
    if c == 14: return f"(mapv (fn [{{:keys [name cost]}}] (format \"%s:%.2f\" name cost)) {rs})"
    if c == 15: return f"(get-in {rs} [{R.randint(0,3)} :tags {R.randint(0,2)}])"
    if c == 16: return f"(assoc-in {rs} [0 :status] \"done\")" if "{" in rs else f"(assoc-in {{}} [:a :b] {R.randint(0,5)})"
    if c == 17: return f"(update-in {{:a {{:b {R.randint(0,5)}}}}} [:a :b] {pick(['inc','dec','-'])})"
    if c == 18: return f"(let [[a b & more] {rs}] [(:id a) (:id b) (count more)])"
    if c == 19: return f"(loop [rs {rs} acc 0] (if (empty? rs) acc (recur (rest rs) (+ acc (:id (first rs))))))"
    if c == 20: return f"(mapv (fn [s] (subs s 0 (min 2 (count s)))) (map :name {rs}))"
    if c == 21: return f"(clojure.string/split {pick(C0)} {pick(C1)})"
    if c == 22: return f"(re-seq #\"[a-z]+\\d*\" {pick(C2)})"
    if c == 23: return f"(re-find #\"(\\w+)-(\\d+)\" {pick(C3)})"
    if c == 24: return f"(clojure.string/replace {pick(C4)} #\"[.\\d]+\" \"_\")"
    if c == 25: return f"(format \"%s|%5.1f|%-4d|%x\" {pick(NAMES)} {pick(['1.3', '3.0', '-0.5', '100.7'])} {R.randint(-9,99)} {R.randint(0,300)})"
    if c == 26: return f"[(* {pick(['1.5','0.1','2.0'])} {R.randint(-3,5)}) (+ 0.5 {R.randint(0,4)}) (- {pick(['1.0','2.5'])} {R.randint(0,3)}) (max 1.5 {R.randint(0,3)})]"
    if c == 27: return f"(let [x {R.randint(-5,15)}] (cond (neg? x) :neg (zero? x) :zero (< x 10) :small :else :big))"
    if c == 28: return f"(case {pick(C5)} :a 1 :b 2 1 :one \"s\" :str nil :nil :default)"
    if c == 29: return f"(condp > {R.randint(0,20)} 5 :lt5 10 :lt10 :ge10)"
    if c == 30: return f"(let [m {{:a {R.randint(0,3)} :b nil}}] [(some-> m :a inc) (some-> m :b inc) (if-let [x (:a m)] x :none) (when-some [y (:b m)] y)])"
    if c == 31: return f"(-> {{:n {R.randint(0,5)}}} (update :n inc) (assoc :m 1) (dissoc :x) (update :m + 2))"
    if c == 32: return f"(cond-> {R.randint(0,5)} {pick(['true','false'])} inc {pick(['true','false'])} (* 10) true str)"
    if c == 33: return f"(as-> {recs()} rs (map :cost rs) (filter #(> % 1) rs) (count rs))"
    if c == 34: return f"((fn f ([] (f 1)) ([a] (f a 2)) ([a b & r] (+ a b (count r)))) {' '.join(str(R.randint(0,3)) for _ in range(R.randint(0,4)))})"
    if c == 35: return f"(let [adders (mapv (fn [n] #(+ % n)) (range 3))] (mapv #(% 10) adders))"
    if c == 37: return f"(partition-by :status (map #(select-keys % [:status]) {rs}))"
    if c == 38: return f"(let [{{:keys [a b] :or {{b 7}} :as m}} {pick(['{:a 1}', '{:a 2 :b 3}', '{}', 'nil'])}] [a b m])"
    return f"(str {pick(['1.0', '0.25', '1e3', '-0.0', '100.5', '3'])} \" \" {pick(C6)})"


# --- "strings" programs: clojure.string, regex (ASCII classes only), format ---------------
ALPH = list("ab ,.-_xyzAZ09\t\n") + ["é", "ü", "ß", "\\", "\"", "ñ", "  ", "ab", "::"]
def rs():
    s = "".join(R.choice(ALPH) for _ in range(R.randint(0, 8)))
    return s
def lit(s):
    return json.dumps(s, ensure_ascii=False)
REGEX = ['#","', '#"\\s+"', '#"[a-z]+"', '#"[0-9]"', '#"([a-z])([a-z])"', '#"[,.]"', '#"(?i)A"', '#"[ ]+"', '#"a."', '#"(ab|z)"']
def strings_program():
    s = lit(rs()); t = lit(rs()); c = R.randint(0, 24)
    if c == 0: return f"(clojure.string/split {s} {R.choice(REGEX)})"
    if c == 1: return f"[(clojure.string/trim {s}) (clojure.string/triml {s}) (clojure.string/trimr {s}) (clojure.string/trim-newline {s})]"
    if c == 2: return f"[(clojure.string/index-of {s} {t}) (clojure.string/last-index-of {s} {t})]"
    if c == 3: return f"(clojure.string/replace {s} {t} \"#\")"
    if c == 4: return f"(clojure.string/replace {s} {R.choice(REGEX)} \"<$0>\")"
    if c == 5: return f"[(clojure.string/upper-case {s}) (clojure.string/lower-case {s})]"
    if c == 6: return f"(let [s {s} n (count s)] [(subs s (quot n 2)) (subs s 0 (quot n 3)) n])"
    if c == 7: return f"(clojure.string/join {t} (clojure.string/split {s} #\",\"))"
    if c == 8: return f"(re-seq {R.choice(REGEX)} {s})"
    if c == 9: return f"(re-find {R.choice(REGEX)} {s})"
    if c == 10: return f"[(clojure.string/includes? {s} {t}) (clojure.string/starts-with? {s} {t}) (clojure.string/ends-with? {s} {t})]"
    if c == 11: return f"(clojure.string/blank? {s})"
    if c == 12: return f"(apply str (reverse {s}))"
    if c == 13: return f"(clojure.string/split-lines {s})"
    if c == 14: return f"(format \"%s|%5s|%-6s|%05d|%x\" {s} {t} {s} {R.randint(-99,999)} {R.randint(0,9999)})"
    if c == 15: return f"(pr-str {s})"
    if c == 16: return f"(str {s} {R.randint(-5,5)} {s})"
    if c == 17: return f"(count {s})"
    if c == 18: return f"(frequencies (map str {s}))"
    if c == 19: return f"(= {s} {t})"
    if c == 20: return f"(compare {s} {t})"
    if c == 21: return f"(sort [{s} {t} {lit(rs())}])"
    if c == 22: return f"(clojure.string/replace-first {s} {R.choice(REGEX)} \"_\")"
    if c == 23: return f"(mapv clojure.string/capitalize [{s} {t}])"
    return f"(re-matches {R.choice(REGEX)} {s})"

# --- "colls" programs: partition, split-at, nested vectors, small keyword maps -------------
def v(n=6): return "[" + " ".join(str(R.randint(-2, 6)) for _ in range(R.randint(0, n))) + "]"
def vv(): return "[" + " ".join(v(3) for _ in range(R.randint(0, 4))) + "]"
def m(): 
    ks = R.sample([":a",":b",":c",":d",":e"], R.randint(0,4))
    return "{" + " ".join(f"{k} {R.choice([str(R.randint(0,5)), v(3), '{:x 1}', 'nil'])}" for k in ks) + "}"
P = ["odd?", "even?", "pos?", "zero?", "#(> % 2)"]
def colls_program():
    c = R.randint(0, 44); n = R.randint(0, 4); k = R.randint(1, 3)
    forms = [
      f"(partition {k} {v(8)})", f"(partition {k} {R.randint(1,3)} {v(8)})", f"(partition {k} {R.randint(1,3)} [:p :q] {v(8)})",
      f"(partition-all {k} {R.randint(1,3)} {v(8)})", f"(split-at {n} {v()})", f"(split-with {R.choice(P)} {v()})",
      f"(interleave {v()} {v()} {v()})", f"(distinct? {R.randint(0,3)} {R.randint(0,3)} {R.randint(0,3)})",
      f"(merge-with + {m().replace('nil','0')} {m().replace('nil','0')})".replace('{:x 1}','1'),
      f"(update-in {m()} [{R.choice([':a',':b'])}] (fnil count []))", f"(nthnext {v()} {n})", f"(nthrest {v()} {n})",
      f"(keep-indexed (fn [i x] (when ({R.choice(P)} x) i)) {v()})", f"(zipmap {v()} {v()})", f"(into {v()} {v()})",
      f"(let [xs {v()}] (when (>= (count xs) 2) (subvec xs 1 (count xs))))", f"(let [xs {v()}] (if (seq xs) (assoc xs 0 :z) xs))",
      f"(let [xs {v()}] (when (seq xs) [(peek xs) (pop xs)]))", f"(flatten {vv()})", f"(mapcat reverse {vv()})",
      f"(apply concat {vv()})", f"(map count {vv()})", f"(sort {vv()})", f"(sort-by count {vv()})", f"(sort-by first {vv()})".replace("first", "#(or (first %) -1)"),
      f"(group-by count {vv()})", f"(frequencies (map count {vv()}))", f"(into {{}} (map (fn [xs] [(count xs) xs]) {vv()}))",
      f"(apply max-key count {vv()})".replace(f"(apply max-key count [])", "(apply max-key count [[1]])"),
      f"(reduce (fn [acc xs] (into acc xs)) #{{}} {vv()})", f"(take-while seq {vv()})", f"(drop-while empty? {vv()})",
      f"(some #(when (> (count %) 1) %) {vv()})", f"(every? vector? {vv()})", f"(filter (comp {R.choice(P)} count) {vv()})",
      f"(last (sort (map #(reduce + 0 %) {vv()})))", f"(compare {v(3)} {v(3)})", f"(tree-seq vector? seq {vv()})",
      f"(dedupe (sort {v()}))", f"(distinct (map count {vv()}))", f"(select-keys {m()} [:a :c :z])", f"(dissoc {m()} :a :b)",
      f"(reduce-kv (fn [acc k x] (+ acc (count (str k)))) 0 {m()})", f"(count (keys {m()}))", f"(vec (sort (map name (keys {m()}))))",
    ]
    return forms[c % len(forms)]

# --- "json" programs: json/parse-string of random documents (checked via clojure.data.json)
CH = list("abcXYZ 019_-/\\\"\n\t") + ["é", "€", "😀", "\u0001", "\u2028", "中"]
def rstr(): return "".join(R.choice(CH) for _ in range(R.randint(0, 6)))
def rnum():
    c=R.randint(0,3)
    if c==0: return R.randint(-10**12, 10**12)
    if c==1: return round(R.uniform(-1e6,1e6), R.randint(0,6))
    if c==2: return R.uniform(0,1)*10**R.randint(-20,20)
    return R.randint(-5,5)
def rval(d):
    c=R.randint(0,6 if d>0 else 3)
    if c==0: return rstr()
    if c==1: return rnum()
    if c==2: return R.choice([True, False, None])
    if c==3: return rnum()
    if c<=4: return [rval(d-1) for _ in range(R.randint(0,4))]
    return {rstr(): rval(d-1) for _ in range(R.randint(0,4))}
def json_program():
    doc = rval(3)
    text = json.dumps(doc, ensure_ascii=R.random() < 0.5, indent=R.choice([None, None, 1]))
    # The program literal itself stays free of \uD83D-style escapes (a known reader gap).
    lit = json.dumps(text, ensure_ascii=False).replace("\u2028", "\\u2028")
    return f"(json/parse-string {lit})"


def evaluate(ptc, program):
    """Runs one program through `ptc eval -` and renders the result as a corpus result line."""
    r = subprocess.run([ptc, "eval", "-"], input=program, capture_output=True, text=True, timeout=60)
    if r.returncode == 0:
        return ";; => " + r.stdout.strip()
    return ";; !! " + r.stderr.strip().split(":")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ptc", required=True, help="path to the ptc CLI binary")
    ap.add_argument("--out", required=True, help="directory to write the generated corpus file into")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--kind", choices=["core", "records", "strings", "colls", "json", "all"], default="all")
    args = ap.parse_args()
    R.seed(args.seed)
    kinds = {
        "core": core_program,
        "records": records_program,
        "strings": strings_program,
        "colls": colls_program,
        "json": json_program,
    }
    gens = list(kinds.values()) if args.kind == "all" else [kinds[args.kind]]
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"differential-{args.kind}-{args.seed}.txt")
    with open(path, "w") as f:
        for i in range(args.count):
            gen = R.choice(gens)
            program = gen()
            # json/* are PTC extensions: the Clojure check supplies them through its prelude.
            marker = ";; ptc-only\n" if gen is json_program else ""
            f.write(f";; case: diff-{args.kind}-{args.seed}-{i}\n{marker}{program}\n{evaluate(args.ptc, program)}\n\n")
    print(f"wrote {args.count} programs to {path}")


if __name__ == "__main__":
    main()
