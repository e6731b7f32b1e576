//! The threads programs run on: about one per core, off the async runtime's workers.
//!
//! A program is a coroutine tied to the thread it started on (its stack holds the interpreter's
//! frames), so each worker thread runs its programs as tasks of a runtime of its own: a program
//! that waits on an upstream is a parked task, and the thread computes the others meanwhile.
//! Upstream I/O itself runs on the host's main runtime. A new program goes to the worker with the
//! fewest programs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{mpsc, oneshot};

/// A program to start on a worker: called there, it makes the future the worker runs.
type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

struct Worker {
    jobs: mpsc::UnboundedSender<Job>,
    programs: Arc<AtomicUsize>,
}

/// The evaluation threads.
pub struct Workers {
    workers: Vec<Worker>,
}

/// Ends when the job's future does, however it ends (a dropped task too).
struct Count(Arc<AtomicUsize>);

impl Drop for Count {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Workers {
    /// `n` worker threads (at least one).
    pub fn new(n: usize) -> std::io::Result<Self> {
        let mut workers = Vec::new();
        for i in 0..n.max(1) {
            let (jobs, mut rx) = mpsc::unbounded_channel::<Job>();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()?;
            std::thread::Builder::new()
                .name(format!("ptc-eval-{i}"))
                .spawn(move || {
                    let local = tokio::task::LocalSet::new();
                    local.block_on(&runtime, async move {
                        while let Some(job) = rx.recv().await {
                            tokio::task::spawn_local(job());
                        }
                    });
                    // The senders are gone (the host is shutting down): finish what runs.
                    runtime.block_on(local);
                })?;
            workers.push(Worker {
                jobs,
                programs: Arc::default(),
            });
        }
        Ok(Workers { workers })
    }

    /// Worker threads.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// Always false: there is at least one worker.
    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// Runs the future `make` builds on a worker thread and gives back its output; `None` if the
    /// worker stopped before the future finished (it panicked, or the host is shutting down).
    pub async fn run<T, F>(&self, make: impl FnOnce() -> F + Send + 'static) -> Option<T>
    where
        T: Send + 'static,
        F: Future<Output = T> + 'static,
    {
        let worker = self
            .workers
            .iter()
            .min_by_key(|w| w.programs.load(Ordering::Acquire))?;
        worker.programs.fetch_add(1, Ordering::AcqRel);
        let count = Count(worker.programs.clone());
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            Box::pin(async move {
                let out = make().await;
                // Uncounted before the answer goes: whoever has it sees the worker's load without it.
                drop(count);
                let _ = tx.send(out);
            })
        });
        worker.jobs.send(job).ok()?;
        rx.await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_runs_on_the_worker_threads_and_comes_back() {
        let workers = Workers::new(2).unwrap();
        assert_eq!(workers.len(), 2);
        let name = workers
            .run(|| async { std::thread::current().name().map(String::from) })
            .await
            .unwrap();
        assert!(name.unwrap().starts_with("ptc-eval-"));
    }

    #[tokio::test]
    async fn a_waiting_job_leaves_its_thread_to_the_others() {
        // One thread; the first job waits for the second, which can only run if the first
        // left the thread while it waited.
        let workers = Arc::new(Workers::new(1).unwrap());
        let (tx, rx) = oneshot::channel::<u8>();
        let w = workers.clone();
        let first = tokio::spawn(async move { w.run(|| async { rx.await.unwrap() }).await });
        let second = workers
            .run(move || async move {
                tx.send(7).unwrap();
                1u8
            })
            .await;
        assert_eq!(second, Some(1));
        assert_eq!(first.await.unwrap(), Some(7));
    }

    #[tokio::test]
    async fn new_work_goes_to_the_least_busy_worker() {
        let workers = Arc::new(Workers::new(2).unwrap());
        let (started_tx, started) = oneshot::channel::<Option<String>>();
        let (release, rx) = oneshot::channel::<()>();
        let w = workers.clone();
        let busy = tokio::spawn(async move {
            w.run(|| async {
                let _ = started_tx.send(std::thread::current().name().map(String::from));
                rx.await.unwrap();
            })
            .await
        });
        let first = started.await.unwrap();
        let other = workers
            .run(|| async { std::thread::current().name().map(String::from) })
            .await
            .unwrap();
        assert_ne!(
            first, other,
            "the second job did not queue behind the first"
        );
        release.send(()).unwrap();
        busy.await.unwrap().unwrap();
        assert!(
            workers
                .workers
                .iter()
                .all(|w| w.programs.load(Ordering::Acquire) == 0),
            "every finished job is uncounted"
        );
    }

    #[tokio::test]
    async fn a_job_that_panics_is_none_and_the_worker_runs_on() {
        let workers = Workers::new(1).unwrap();
        let r: Option<u8> = workers.run(|| async { panic!("a bug") }).await;
        assert_eq!(r, None);
        assert_eq!(workers.run(|| async { 5u8 }).await, Some(5));
    }
}
