//! The threads programs run on: about one per core, off the async runtime's workers.
//!
//! A program is a coroutine tied to the thread it started on (its stack holds the interpreter's
//! frames), so each worker thread runs its programs as tasks of an executor of its own: a program
//! that waits on an upstream is a parked task, and the thread computes the others meanwhile.
//! Upstream I/O and timers run on the host's main runtime; what a worker polls needs none. A new
//! program goes to the worker with the fewest programs.
//!
//! The executor is a channel and a table of tasks rather than a tokio runtime with a `LocalSet`,
//! so that an idle worker can look for work a little before it sleeps: on a 2-vCPU virtual
//! machine, waking a sleeping thread (its vCPU halted) made handing a `(+ 1 2)` evaluation to a
//! worker and back take about 100 µs at the median, with the spin 12 µs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::task::{Context, Wake, Waker};

use tokio::sync::oneshot;

/// A program to start on a worker: called there, it makes the future the worker runs.
type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// What a worker thread is told: start a job, or poll task `n` again.
enum Message {
    Start(Job),
    Wake(usize),
}

struct Worker {
    inbox: mpsc::Sender<Message>,
    programs: Arc<AtomicUsize>,
}

/// Wakes task `task` of a worker by telling the worker.
struct TaskWaker {
    task: usize,
    inbox: mpsc::Sender<Message>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        let _ = self.inbox.send(Message::Wake(self.task));
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let _ = self.inbox.send(Message::Wake(self.task));
    }
}

/// How long an idle worker looks for work before it sleeps: waking a sleeping thread on a
/// virtual machine costs tens of microseconds, more than a small evaluation.
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// The next message, spinning a little before sleeping; `None` when the host is gone.
fn next(inbox: &mpsc::Receiver<Message>) -> Option<Message> {
    let start = std::time::Instant::now();
    // Reading the clock on every turn was a twentieth of a busy host's time: read it every 32.
    let mut turns = 0u32;
    loop {
        match inbox.try_recv() {
            Ok(m) => return Some(m),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) => {
                turns = turns.wrapping_add(1);
                if turns.is_multiple_of(32) && start.elapsed() >= SPIN {
                    return inbox.recv().ok();
                }
                std::hint::spin_loop();
            }
        }
    }
}

/// A worker thread's loop: its tasks, each polled when it starts and whenever woken, until the
/// host drops its side of the channel.
fn work(inbox: mpsc::Receiver<Message>, to_self: mpsc::Sender<Message>) {
    let mut tasks: Vec<Option<Pin<Box<dyn Future<Output = ()>>>>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    while let Some(message) = next(&inbox) {
        let n = match message {
            Message::Start(job) => {
                let task = job();
                match free.pop() {
                    Some(n) => {
                        tasks[n] = Some(task);
                        n
                    }
                    None => {
                        tasks.push(Some(task));
                        tasks.len() - 1
                    }
                }
            }
            Message::Wake(n) => n,
        };
        // A wake for a task that finished (or for an earlier task of a reused slot) polls
        // nothing or polls once more than needed, which a future allows.
        let Some(Some(task)) = tasks.get_mut(n) else {
            continue;
        };
        let waker = Waker::from(Arc::new(TaskWaker {
            task: n,
            inbox: to_self.clone(),
        }));
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            task.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_ready()
        }))
        .unwrap_or(true);
        if done {
            tasks[n] = None;
            free.push(n);
        }
    }
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
            let (inbox, rx) = mpsc::channel::<Message>();
            let to_self = inbox.clone();
            std::thread::Builder::new()
                .name(format!("ptc-eval-{i}"))
                .spawn(move || work(rx, to_self))?;
            workers.push(Worker {
                inbox,
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
        worker.inbox.send(Message::Start(job)).ok()?;
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
