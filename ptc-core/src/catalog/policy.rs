//! What each caller may reach: the deployment's policy file maps callers (by subject, client,
//! scopes or groups) to the tools they may call (globs over `upstream/tool`), whether writes are
//! among them, and their limits. The first rule that matches a caller is its [`Grant`]; a caller
//! no rule matches may run nothing. Without a policy file every caller may call every tool.
//!
//! A rule may also name the declared programs (tools of the host, see docs/programs.md) its
//! callers may run, by glob (`programs`; by default every program whose tools the rule allows),
//! and keep them to those programs (`lisp_eval: false`: no program of their own).
//!
//! ```json
//! {"rules": [
//!   {"name": "sre", "callers": {"groups": ["sre"]}, "tools": ["*"], "writes": true},
//!   {"name": "agents", "callers": {"scopes": ["ptc:read"]},
//!    "tools": ["observatory/*"], "except": ["observatory/annotate-*"],
//!    "limits": {"calls_per_program": 20, "programs_per_minute": 30}},
//!   {"name": "reviewed-only", "callers": {"scopes": ["ptc:programs"]},
//!    "tools": ["observatory/*"], "programs": ["errors-by-*"], "lisp_eval": false}
//! ]}
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

use crate::catalog::ToolEntry;
use crate::credentials::identity::Caller;

/// The deployment's policy: rules tried in order.
#[derive(Debug)]
pub struct Policy {
    rules: Vec<Arc<Rule>>,
}

/// One rule: which callers it is for and what they may do.
#[derive(Debug)]
pub struct Rule {
    /// Its name, quoted in every refusal it causes.
    pub name: String,
    callers: Callers,
    tools: Globs,
    except: Globs,
    /// Whether writes (and safe queries) among its tools may be called.
    pub writes: bool,
    /// The declared programs its callers may run (`None`: every one whose tools it allows).
    programs: Option<Globs>,
    /// Whether its callers may send programs of their own to `lisp_eval`.
    pub lisp_eval: bool,
    /// Upstream calls per program (at most the host's own limit).
    pub calls_per_program: Option<u64>,
    /// Programs per minute per caller.
    pub programs_per_minute: Option<u32>,
}

#[derive(Debug, Default)]
struct Callers {
    subjects: Option<Globs>,
    client_ids: Option<Globs>,
    scopes: Vec<String>,
    groups: Vec<String>,
}

/// Glob patterns, with their text for messages.
#[derive(Debug)]
struct Globs {
    set: GlobSet,
    text: Vec<String>,
}

impl Globs {
    fn new(patterns: &[String], at: &str) -> Result<Globs, String> {
        let mut set = GlobSetBuilder::new();
        for p in patterns {
            set.add(Glob::new(p).map_err(|e| format!("{at}: bad glob `{p}`: {e}"))?);
        }
        Ok(Globs {
            set: set.build().map_err(|e| format!("{at}: {e}"))?,
            text: patterns.to_vec(),
        })
    }

    fn matches(&self, name: &str) -> bool {
        self.set.is_match(name)
    }
}

// The file's shape; unknown fields are errors, so a misspelled key cannot silently widen a rule.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    rules: Vec<RuleFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    name: String,
    #[serde(default)]
    callers: CallersFile,
    tools: Vec<String>,
    #[serde(default)]
    except: Vec<String>,
    #[serde(default)]
    writes: bool,
    programs: Option<Vec<String>>,
    #[serde(default = "yes")]
    lisp_eval: bool,
    #[serde(default)]
    limits: LimitsFile,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CallersFile {
    subjects: Option<Vec<String>>,
    client_ids: Option<Vec<String>>,
    #[serde(default)]
    scopes: Vec<String>,
    #[serde(default)]
    groups: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    calls_per_program: Option<u64>,
    programs_per_minute: Option<u32>,
}

impl Policy {
    /// Reads and checks the policy file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Policy, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the policy file {}: {e}", path.display()))?;
        Policy::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A policy from its JSON text; every problem names the rule (and field) it is in.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let file: File = serde_json::from_str(text).map_err(|e| format!("invalid policy: {e}"))?;
        if file.rules.is_empty() {
            return Err("invalid policy: no rules (nobody could run anything)".into());
        }
        let mut rules = Vec::new();
        let mut names = std::collections::HashSet::new();
        for (i, r) in file.rules.into_iter().enumerate() {
            let at = format!("rules[{i}] (`{}`)", r.name);
            if r.name.trim().is_empty() {
                return Err(format!("rules[{i}]: a rule needs a name"));
            }
            if !names.insert(r.name.clone()) {
                return Err(format!("{at}: another rule has this name"));
            }
            if r.tools.is_empty() {
                return Err(format!(
                    "{at}: `tools` is empty; list globs such as \"observatory/*\""
                ));
            }
            if r.limits.calls_per_program == Some(0) || r.limits.programs_per_minute == Some(0) {
                return Err(format!(
                    "{at}: a limit of 0 allows nothing; remove the rule, or let it match nobody"
                ));
            }
            let globs = |list: &Option<Vec<String>>, field: &str| {
                list.as_ref()
                    .map(|l| Globs::new(l, &format!("{at}.callers.{field}")))
                    .transpose()
            };
            rules.push(Arc::new(Rule {
                callers: Callers {
                    subjects: globs(&r.callers.subjects, "subjects")?,
                    client_ids: globs(&r.callers.client_ids, "client_ids")?,
                    scopes: r.callers.scopes,
                    groups: r.callers.groups,
                },
                tools: Globs::new(&r.tools, &format!("{at}.tools"))?,
                except: Globs::new(&r.except, &format!("{at}.except"))?,
                writes: r.writes,
                programs: r
                    .programs
                    .as_ref()
                    .map(|p| Globs::new(p, &format!("{at}.programs")))
                    .transpose()?,
                lisp_eval: r.lisp_eval,
                calls_per_program: r.limits.calls_per_program,
                programs_per_minute: r.limits.programs_per_minute,
                name: r.name,
            }));
        }
        Ok(Policy { rules })
    }

    /// What `caller` may do: the first rule that matches it.
    pub fn grant(&self, caller: &Caller) -> Result<Grant, String> {
        self.rules
            .iter()
            .find(|r| r.callers.admit(caller))
            .map(|r| Grant(Access::Rule(r.clone())))
            .ok_or_else(|| {
                format!(
                    "no policy rule matches the caller `{}`{}: ask the deployment's operators \
                     for access",
                    caller.subject,
                    caller
                        .client_id
                        .as_deref()
                        .map(|c| format!(" (client `{c}`)"))
                        .unwrap_or_default()
                )
            })
    }
}

impl Callers {
    /// Every criterion the rule gives holds: a subject and client glob match, every scope is
    /// granted, and one of the groups is the caller's.
    fn admit(&self, caller: &Caller) -> bool {
        self.subjects
            .as_ref()
            .is_none_or(|g| g.matches(&caller.subject))
            && self
                .client_ids
                .as_ref()
                .is_none_or(|g| caller.client_id.as_deref().is_some_and(|c| g.matches(c)))
            && self.scopes.iter().all(|s| caller.scopes.contains(s))
            && (self.groups.is_empty() || self.groups.iter().any(|g| caller.groups.contains(g)))
    }
}

/// What one caller may do: a rule of the policy, or everything where there is no policy.
#[derive(Clone, Debug)]
pub struct Grant(Access);

#[derive(Clone, Debug)]
enum Access {
    Everything,
    Rule(Arc<Rule>),
    Nothing,
}

impl Default for Grant {
    fn default() -> Self {
        Grant::everything()
    }
}

impl Grant {
    /// Everything (no policy file).
    pub fn everything() -> Self {
        Grant(Access::Everything)
    }

    /// Nothing: what a caller no rule is for sees.
    pub fn nothing() -> Self {
        Grant(Access::Nothing)
    }

    /// The rule, if a policy decided.
    pub fn rule(&self) -> Option<&Rule> {
        match &self.0 {
            Access::Rule(r) => Some(r),
            _ => None,
        }
    }

    /// Whether discovery shows `tool` to this caller.
    pub fn sees(&self, tool: &ToolEntry) -> bool {
        self.check(tool).is_ok()
    }

    /// Whether this caller may call `tool`; the refusal names the rule and what it allows.
    pub fn check(&self, tool: &ToolEntry) -> Result<(), String> {
        let name = tool.qualified();
        let rule = match &self.0 {
            Access::Everything => return Ok(()),
            Access::Nothing => return Err(format!("{name}: no policy rule is for this caller")),
            Access::Rule(r) => r,
        };
        if !rule.tools.matches(&name) || rule.except.matches(&name) {
            return Err(format!(
                "{name}: policy rule `{}` does not allow this tool (it allows {}{})",
                rule.name,
                rule.tools.text.join(", "),
                if rule.except.text.is_empty() {
                    String::new()
                } else {
                    format!(" except {}", rule.except.text.join(", "))
                }
            ));
        }
        if !tool.classified.effect.is_read() && !rule.writes {
            return Err(format!(
                "{name}: policy rule `{}` does not allow writes",
                rule.name
            ));
        }
        Ok(())
    }

    /// Whether this caller may run declared program `name` (each tool it calls is checked too,
    /// with [`Grant::check`]).
    pub fn runs_program(&self, name: &str) -> bool {
        match &self.0 {
            Access::Everything => true,
            Access::Nothing => false,
            Access::Rule(r) => r.programs.as_ref().is_none_or(|g| g.matches(name)),
        }
    }

    /// Whether this caller may send a program of their own to `lisp_eval`; the refusal names
    /// the rule.
    pub fn check_lisp_eval(&self) -> Result<(), String> {
        match &self.0 {
            Access::Rule(r) if !r.lisp_eval => Err(format!(
                "policy rule `{}` does not allow programs of your own (lisp_eval): call one of \
                 the deployment's programs, listed as tools",
                r.name
            )),
            _ => Ok(()),
        }
    }

    /// The calls per program: the host's `max`, or the rule's when smaller.
    pub fn calls_per_program(&self, max: u64) -> u64 {
        self.rule()
            .and_then(|r| r.calls_per_program)
            .map_or(max, |n| n.min(max))
    }
}

/// Programs each caller started in the last minute, for rules with `programs_per_minute`.
pub struct Pace {
    started: Mutex<HashMap<(String, String), VecDeque<Instant>>>,
    /// Callers tracked before idle ones are swept out.
    sweep_at: usize,
}

impl Default for Pace {
    fn default() -> Self {
        Pace::sweeping_at(10_000)
    }
}

impl Pace {
    /// A pace that sweeps out callers idle for a minute once it tracks `sweep_at` of them.
    fn sweeping_at(sweep_at: usize) -> Self {
        Pace {
            started: Mutex::default(),
            sweep_at,
        }
    }

    /// Counts a program `caller` starts `now`, or says when it may start one under its grant.
    pub fn admit(&self, grant: &Grant, caller: &str, now: Instant) -> Result<(), String> {
        let Some((rule, max)) = grant
            .rule()
            .and_then(|r| r.programs_per_minute.map(|m| (r, m)))
        else {
            return Ok(());
        };
        let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        if started.len() >= self.sweep_at {
            started.retain(|_, times| times.back().is_some_and(|t| now - *t < MINUTE));
        }
        let times = started
            .entry((rule.name.clone(), caller.to_string()))
            .or_default();
        while times.front().is_some_and(|t| now - *t >= MINUTE) {
            times.pop_front();
        }
        if times.len() >= max as usize {
            let free = times
                .front()
                .map_or(Duration::ZERO, |t| MINUTE - (now - *t));
            return Err(format!(
                "the caller `{caller}` started {max} programs in the last minute, the limit of \
                 policy rule `{}`; retry in {} s",
                rule.name,
                free.as_secs_f64().ceil() as u64
            ));
        }
        times.push_back(now);
        Ok(())
    }
}

const MINUTE: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use super::*;
    use ptc_plan::Effect;

    fn caller(subject: &str, client: Option<&str>, scopes: &[&str], groups: &[&str]) -> Caller {
        Caller {
            subject: subject.into(),
            client_id: client.map(str::to_string),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            groups: groups.iter().map(|s| s.to_string()).collect(),
            issuer: None,
            token: None,
        }
    }

    fn tool(server: &str, name: &str, effect: Effect) -> ToolEntry {
        let mut t = crate::catalog::tests_support::tool(server, name);
        t.classified.effect = effect;
        t
    }

    /// `programs` narrows the declared programs a rule's callers may run (by default every
    /// one); `lisp_eval: false` keeps them to those programs; no policy allows both.
    #[test]
    fn a_rule_names_the_programs_its_callers_run_and_may_forbid_their_own() {
        let policy = Policy::parse(
            r#"{"rules": [
            {"name": "reviewed", "callers": {"groups": ["support"]}, "tools": ["obs/*"],
             "programs": ["errors-*", "costs"], "lisp_eval": false},
            {"name": "all", "tools": ["obs/*"]}
        ]}"#,
        )
        .unwrap();
        let support = policy.grant(&caller("s", None, &[], &["support"])).unwrap();
        assert!(support.runs_program("errors-by-class") && support.runs_program("costs"));
        assert!(!support.runs_program("failed-run") && !support.runs_program("costs-2"));
        assert_eq!(
            support.check_lisp_eval(),
            Err(
                "policy rule `reviewed` does not allow programs of your own (lisp_eval): call \
                 one of the deployment's programs, listed as tools"
                    .into()
            )
        );
        let other = policy.grant(&caller("o", None, &[], &[])).unwrap();
        assert!(other.runs_program("failed-run") && other.check_lisp_eval().is_ok());
        assert!(
            Grant::everything().runs_program("x") && Grant::everything().check_lisp_eval().is_ok()
        );
        assert!(!Grant::nothing().runs_program("x"));
        let bad = Policy::parse(r#"{"rules": [{"name": "r", "tools": ["*"], "programs": ["["]}]}"#)
            .unwrap_err();
        assert!(
            bad.starts_with("rules[0] (`r`).programs: bad glob `[`"),
            "{bad}"
        );
    }

    const POLICY: &str = r#"{"rules": [
        {"name": "sre", "callers": {"groups": ["sre", "oncall"]}, "tools": ["*"], "writes": true,
         "limits": {"calls_per_program": 500}},
        {"name": "bots", "callers": {"subjects": ["bot-*"], "client_ids": ["ci"], "scopes": ["ptc:read", "ptc:eval"]},
         "tools": ["obs/*"], "except": ["obs/secret-*"], "limits": {"calls_per_program": 5, "programs_per_minute": 2}},
        {"name": "everyone", "tools": ["obs/list-*"]}
    ]}"#;

    #[test]
    fn the_first_matching_rule_decides() {
        let p = Policy::parse(POLICY).unwrap();
        let name = |c: &Caller| p.grant(c).unwrap().rule().unwrap().name.clone();
        assert_eq!(name(&caller("alice", None, &[], &["oncall"])), "sre");
        let bot = caller("bot-7", Some("ci"), &["ptc:eval", "ptc:read", "x"], &[]);
        assert_eq!(name(&bot), "bots");
        // Each of the bots criteria must hold.
        assert_eq!(
            name(&caller("bot-7", Some("ci"), &["ptc:read"], &[])),
            "everyone"
        );
        assert_eq!(
            name(&caller("bot-7", None, &["ptc:read", "ptc:eval"], &[])),
            "everyone"
        );
        assert_eq!(
            name(&caller("robot", Some("ci"), &["ptc:read", "ptc:eval"], &[])),
            "everyone"
        );
        assert_eq!(name(&caller("carol", None, &[], &["dev"])), "everyone");
    }

    #[test]
    fn a_caller_no_rule_matches_gets_nothing() {
        let p = Policy::parse(
            r#"{"rules": [{"name": "sre", "callers": {"groups": ["sre"]}, "tools": ["*"]}]}"#,
        )
        .unwrap();
        let e = p
            .grant(&caller("mallory", Some("web"), &[], &[]))
            .unwrap_err();
        assert_eq!(
            e,
            "no policy rule matches the caller `mallory` (client `web`): ask the deployment's \
             operators for access"
        );
    }

    #[test]
    fn tools_writes_and_limits() {
        let p = Policy::parse(POLICY).unwrap();
        let bots = p
            .grant(&caller("bot-1", Some("ci"), &["ptc:read", "ptc:eval"], &[]))
            .unwrap();
        assert!(
            bots.check(&tool("obs", "list-traces", Effect::Read))
                .is_ok()
        );
        assert_eq!(
            bots.check(&tool("obs", "secret-keys", Effect::Read))
                .unwrap_err(),
            "obs/secret-keys: policy rule `bots` does not allow this tool (it allows obs/* \
             except obs/secret-*)"
        );
        assert!(!bots.sees(&tool("other", "list-traces", Effect::Read)));
        assert_eq!(
            bots.check(&tool("obs", "annotate", Effect::Write))
                .unwrap_err(),
            "obs/annotate: policy rule `bots` does not allow writes"
        );
        assert!(
            bots.check(&tool("obs", "search", Effect::SafeQuery))
                .is_err()
        );
        assert_eq!(bots.calls_per_program(50), 5);
        assert_eq!(bots.calls_per_program(3), 3, "never above the host's limit");
        let sre = p.grant(&caller("a", None, &[], &["sre"])).unwrap();
        assert!(sre.check(&tool("x", "y", Effect::Write)).is_ok());
        assert_eq!(sre.calls_per_program(50), 50);
        let everyone = p.grant(&caller("c", None, &[], &[])).unwrap();
        assert_eq!(everyone.calls_per_program(50), 50);
        assert!(
            Grant::everything()
                .check(&tool("x", "y", Effect::Write))
                .is_ok()
        );
        assert!(!Grant::nothing().sees(&tool("x", "y", Effect::Read)));
        assert_eq!(Grant::everything().calls_per_program(7), 7);
    }

    #[test]
    fn programs_per_minute_per_caller() {
        let p = Policy::parse(POLICY).unwrap();
        let bot = |s: &str| caller(s, Some("ci"), &["ptc:read", "ptc:eval"], &[]);
        let grant = p.grant(&bot("bot-1")).unwrap();
        let pace = Pace::default();
        let t0 = Instant::now();
        assert!(pace.admit(&grant, "bot-1", t0).is_ok());
        assert!(
            pace.admit(&grant, "bot-1", t0 + Duration::from_secs(10))
                .is_ok()
        );
        assert_eq!(
            pace.admit(&grant, "bot-1", t0 + Duration::from_millis(59_001))
                .unwrap_err(),
            "the caller `bot-1` started 2 programs in the last minute, the limit of policy rule \
             `bots`; retry in 1 s"
        );
        assert!(
            pace.admit(&grant, "bot-2", t0).is_ok(),
            "another caller has its own count"
        );
        // The first program leaves the window exactly a minute after it started.
        assert!(pace.admit(&grant, "bot-1", t0 + MINUTE).is_ok());
        assert!(pace.admit(&grant, "bot-1", t0 + MINUTE).is_err());
        let everyone = p.grant(&caller("c", None, &[], &[])).unwrap();
        for _ in 0..100 {
            assert!(
                pace.admit(&everyone, "c", t0).is_ok(),
                "no limit in the rule"
            );
        }
        assert!(pace.admit(&Grant::everything(), "c", t0).is_ok());
    }

    #[test]
    fn callers_idle_for_a_minute_are_swept_out_once_many_are_tracked() {
        let p = Policy::parse(POLICY).unwrap();
        let grant = p
            .grant(&caller("bot-1", Some("ci"), &["ptc:read", "ptc:eval"], &[]))
            .unwrap();
        let pace = Pace::sweeping_at(2);
        let t0 = Instant::now();
        let tracked = || pace.started.lock().unwrap().len();
        pace.admit(&grant, "a", t0).unwrap();
        pace.admit(&grant, "b", t0 + Duration::from_secs(1))
            .unwrap();
        assert_eq!(tracked(), 2);
        // At the threshold, a minute after `a`'s last program (not yet after `b`'s): `a` goes.
        pace.admit(&grant, "c", t0 + MINUTE).unwrap();
        assert_eq!(tracked(), 2, "a swept, b kept, c added");
        assert!(
            pace.started
                .lock()
                .unwrap()
                .keys()
                .all(|(_, who)| who != "a")
        );
        // Below the threshold nothing is swept.
        let pace = Pace::sweeping_at(3);
        pace.admit(&grant, "a", t0).unwrap();
        pace.admit(&grant, "b", t0).unwrap();
        pace.admit(&grant, "c", t0 + MINUTE).unwrap();
        assert_eq!(pace.started.lock().unwrap().len(), 3);
        assert_eq!(
            Grant::default().calls_per_program(9),
            9,
            "no policy: everything"
        );
    }

    #[test]
    fn a_bad_policy_says_where() {
        let bad = |text: &str| Policy::parse(text).unwrap_err();
        assert!(bad("{}").contains("missing field `rules`"));
        assert!(bad(r#"{"rules": []}"#).contains("no rules"));
        assert!(
            bad(r#"{"rules": [{"name": "a", "tools": ["*"], "write": true}]}"#)
                .contains("unknown field `write`")
        );
        assert_eq!(
            bad(r#"{"rules": [{"name": "a", "tools": []}]}"#),
            "rules[0] (`a`): `tools` is empty; list globs such as \"observatory/*\""
        );
        assert_eq!(
            bad(r#"{"rules": [{"name": "a", "tools": ["*"]}, {"name": "a", "tools": ["*"]}]}"#),
            "rules[1] (`a`): another rule has this name"
        );
        assert_eq!(
            bad(r#"{"rules": [{"name": " ", "tools": ["*"]}]}"#),
            "rules[0]: a rule needs a name"
        );
        assert!(
            bad(r#"{"rules": [{"name": "a", "tools": ["a/[b"]}]}"#)
                .starts_with("rules[0] (`a`).tools: bad glob `a/[b`")
        );
        assert!(
            bad(r#"{"rules": [{"name": "a", "tools": ["*"], "callers": {"subjects": ["[x"]}}]}"#)
                .starts_with("rules[0] (`a`).callers.subjects: bad glob")
        );
        for limit in ["calls_per_program", "programs_per_minute"] {
            let text = format!(
                r#"{{"rules": [{{"name": "a", "tools": ["*"], "limits": {{"{limit}": 0}}}}]}}"#
            );
            assert!(
                bad(&text).contains("a limit of 0 allows nothing"),
                "{limit}"
            );
        }
        let one = r#"{"rules": [{"name": "a", "tools": ["*"], "limits": {"calls_per_program": 1, "programs_per_minute": 1}}]}"#;
        assert!(Policy::parse(one).is_ok(), "1 is the smallest limit");
    }
}
