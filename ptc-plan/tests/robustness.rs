//! Bad input of any shape gives diagnostics, never a panic: the fixture config and document are
//! mutated thousands of ways (deterministically) and every load must return.

use std::path::Path;

use ptc_plan::{DocumentRequest, DocumentSource};
use serde_json::{Value, json};

struct Memory(Vec<u8>);

impl DocumentSource for Memory {
    fn fetch(&self, request: &DocumentRequest) -> Result<Vec<u8>, String> {
        if self.0.len() as u64 > request.max_bytes {
            return Err("too big".into());
        }
        Ok(self.0.clone())
    }
}

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const REPLACEMENTS: fn() -> Vec<Value> = || {
    vec![
        Value::Null,
        json!(true),
        json!(-1),
        json!(0),
        json!(1.5),
        json!(""),
        json!("x y"),
        json!("http://h"),
        json!("#/components/schemas/Nope"),
        json!([]),
        json!({}),
        json!({"$ref": "#/paths"}),
        json!({"$ref": "#"}),
        json!(["a", 1]),
    ]
};

/// Replaces or deletes one randomly chosen node of `v`.
fn mutate(v: &mut Value, rng: &mut Rng) {
    let mut node = v;
    loop {
        let children = match node {
            Value::Object(m) => m.len(),
            Value::Array(a) => a.len(),
            _ => 0,
        };
        if children == 0 || rng.below(4) == 0 {
            break;
        }
        let i = rng.below(children);
        node = match node {
            Value::Object(m) => {
                if rng.below(6) == 0 {
                    let key = m.keys().nth(i).unwrap().clone();
                    m.remove(&key);
                    return;
                }
                m.values_mut().nth(i).unwrap()
            }
            Value::Array(a) => &mut a[i],
            _ => unreachable!(),
        };
    }
    let r = REPLACEMENTS();
    *node = r[rng.below(r.len())].clone();
}

fn fixture(rel: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(rel);
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn mutated_configs_and_documents_never_panic() {
    let config = fixture("observatory/upstreams.json");
    let doc = fixture("observatory/observatory.openapi.json");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/upstreams.json");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut ok, mut failed) = (0, 0);
    for round in 0..1500 {
        let mut c = config.clone();
        let mut d = doc.clone();
        for _ in 0..1 + rng.below(3) {
            if round % 2 == 0 {
                mutate(&mut c, &mut rng);
            } else {
                mutate(&mut d, &mut rng);
            }
        }
        let source = Memory(serde_json::to_vec(&d).unwrap());
        match ptc_plan::load_str(&c.to_string(), &path, &source) {
            Ok(_) => ok += 1,
            Err(diags) => {
                assert!(!diags.is_empty());
                for diag in diags.iter() {
                    assert!(!diag.message.is_empty());
                }
                failed += 1;
            }
        }
    }
    // Both outcomes must occur, or the mutations are not exercising anything.
    assert!(ok > 50 && failed > 50, "ok={ok} failed={failed}");
}

#[test]
fn truncated_and_garbage_documents_are_diagnosed() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/upstreams.json");
    let config = std::fs::read_to_string(&path).unwrap();
    let doc = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/observatory/observatory.openapi.json"),
    )
    .unwrap();
    let end = doc.trim_ascii_end().len();
    for cut in [0, 1, 10, end / 2, end - 1] {
        let diags = ptc_plan::load_str(&config, &path, &Memory(doc[..cut].to_vec())).unwrap_err();
        assert!(diags.to_string().contains("not valid"), "{diags}");
    }
    let deep = "[".repeat(100_000);
    let diags = ptc_plan::load_str(&config, &path, &Memory(deep.into_bytes())).unwrap_err();
    assert!(diags.to_string().contains("not valid"), "{diags}");
    let deep_config = format!("{}{}", "{\"a\":".repeat(50_000), "1");
    let diags = ptc_plan::load_str(&deep_config, &path, &Memory(doc)).unwrap_err();
    assert!(
        diags.to_string().contains("config is not valid JSON"),
        "{diags}"
    );
}

#[test]
fn yaml_documents_compile_like_json() {
    let dir = std::env::temp_dir().join(format!("ptc-plan-yaml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("api.yaml"),
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /things/{id}:\n    get:\n      operationId: getThing\n      parameters:\n        - {name: id, in: path, required: true, schema: {type: string}}\n        - {name: verbose, in: query, schema: {type: boolean, nullable: true}}\n      responses:\n        200:\n          description: ok\n          content:\n            application/json:\n              schema: {type: object, properties: {id: {type: string}}}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("upstreams.json"),
        r#"{"upstreams": {"things": {"transport": "openapi", "base_url": "https://things.example",
            "schema_file": "api.yaml", "include_operations": ["getThing"]}}}"#,
    )
    .unwrap();
    let loaded = ptc_plan::load(&dir.join("upstreams.json")).unwrap_or_else(|d| panic!("{d}"));
    let ptc_plan::Transport::Openapi(api) = &loaded.plan.upstreams[0].transport else {
        panic!()
    };
    let t = &api.tools[0];
    assert_eq!(t.name, "get-thing");
    assert_eq!(
        t.input_schema["properties"]["verbose"]["type"],
        json!(["boolean", "null"])
    );
    assert_eq!(t.output_schema["properties"]["id"]["type"], "string");
    std::fs::remove_dir_all(&dir).ok();
}
