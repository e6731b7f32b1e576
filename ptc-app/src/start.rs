//! Start-up: the plan (from a config file or compiled in), the operator's overrides, the
//! upstreams.

use std::path::PathBuf;
use std::sync::Arc;

use ptc_core::Upstreams;
use ptc_core::call::upstreams::StartSettings;
use ptc_core::credentials::upstream_oauth::Grants;
use ptc_plan::{Plan, Secrets};

use crate::args::OverrideArgs;
use crate::overrides::Overrides;

/// Where a binary's plan comes from.
pub enum PlanSource {
    /// An upstreams.json read and validated at start-up (`ptc --config`).
    Config(PathBuf),
    /// A plan compiled into the binary (`ptc_upstreams!`), with its literal secrets.
    Compiled(Box<dyn Fn() -> Result<(Plan, Secrets), String> + Send + Sync>),
}

impl PlanSource {
    /// The plan with `overrides` applied (and validated by ptc-plan's rules).
    pub fn load(&self, overrides: &OverrideArgs) -> Result<(Plan, Secrets), String> {
        let overrides = Overrides::from_args(overrides)?;
        match self {
            PlanSource::Config(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                let text = overrides.apply_to_config(&text, path)?;
                let loaded =
                    ptc_plan::load_str(&text, path, &ptc_core::wire::documents::NetworkSource)
                        .map_err(|d| format!("{}: invalid config\n{d}", path.display()))?;
                Ok((loaded.plan, loaded.secrets))
            }
            PlanSource::Compiled(make) => {
                let (mut plan, secrets) = make()?;
                overrides.apply_to_plan(&mut plan)?;
                Ok((plan, secrets))
            }
        }
    }
}

/// How a running host refreshes its catalog: a config is read, compiled and started again;
/// a compiled-in catalog is the binary's build, so it is refused with the way to change it.
/// It starts the upstreams with the settings the host started with: a refresh changes the
/// catalog, never the write gate.
pub fn reload(
    source: Arc<PlanSource>,
    overrides: OverrideArgs,
    start: StartSettings,
    kept: Kept,
) -> ptc_core::server::Reload {
    Arc::new(move || {
        let (source, overrides, kept) = (source.clone(), overrides.clone(), kept.clone());
        Box::pin(async move {
            if matches!(*source, PlanSource::Compiled(_)) {
                return Err("this deployment's catalog is compiled into its binary \
                            (ptc_upstreams!): change the config and rebuild to change it"
                    .to_string());
            }
            started(&source, &overrides, start, kept).await
        })
    })
}

/// A multi-threaded runtime for the host (async I/O on its workers; evaluations on its blocking
/// pool).
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// Loads the plan and starts its upstreams with `start` (the command's
/// [`OverrideArgs::start_settings`], built once).
pub async fn upstreams(
    source: &PlanSource,
    overrides: &OverrideArgs,
    start: StartSettings,
) -> Result<Arc<Upstreams>, String> {
    started(source, overrides, start, Kept::default())
        .await
        .map(Arc::new)
}

/// What a host's upstreams keep across its catalog refreshes: where OAuth grants are kept, and
/// the redactor (shared with the host's log).
#[derive(Clone, Default)]
pub struct Kept {
    /// Where OAuth grants are kept.
    pub grants: Arc<Grants>,
    /// Every secret read or issued is registered here.
    pub redactor: ptc_core::credentials::redact::Redactor,
}

/// [`upstreams`] that keep `kept` (a host's, shared with its refreshes).
pub async fn upstreams_keeping(
    source: &PlanSource,
    overrides: &OverrideArgs,
    start: StartSettings,
    kept: Kept,
) -> Result<Arc<Upstreams>, String> {
    started(source, overrides, start, kept).await.map(Arc::new)
}

/// [`upstreams_keeping`] `grants`, listing no MCP upstream at start (`login` connects the one it
/// names, as its caller).
pub async fn upstreams_listed_later(
    source: &PlanSource,
    overrides: &OverrideArgs,
    start: StartSettings,
    grants: Arc<Grants>,
) -> Result<Arc<Upstreams>, String> {
    let (plan, secrets) = source.load(overrides)?;
    let options = ptc_core::StartOptions {
        grants,
        catalog: ptc_core::CatalogLoad::OnFirstUse,
        ..start.options()
    };
    Upstreams::start(plan, secrets, options)
        .await
        .map(Arc::new)
        .map_err(|e| format!("cannot start the upstreams: {e}"))
}

async fn started(
    source: &PlanSource,
    overrides: &OverrideArgs,
    start: StartSettings,
    kept: Kept,
) -> Result<Upstreams, String> {
    let (plan, secrets) = source.load(overrides)?;
    let options = ptc_core::StartOptions {
        grants: kept.grants,
        redactor: Some(kept.redactor),
        ..start.options()
    };
    Upstreams::start(plan, secrets, options)
        .await
        .map_err(|e| format!("cannot start the upstreams: {e}"))
}
