//! The threads programs run on: about one per core, off the async runtime's workers.
//!
//! A program is a coroutine tied to the thread it started on (its stack holds the interpreter's
//! frames), so each worker thread runs its programs as tasks of an executor of its own: a program
//! that waits on an upstream is a parked task, and the thread computes the others meanwhile.
//! Upstream I/O and timers run on the host's main runtime; what a worker polls needs none. A new
//! program goes to the worker with the fewest programs. Which of a worker's ready programs runs
//! next is fair per party (see [`run_queue`](super::run_queue)): every message waiting is taken
//! in before each choice, and each message asks the program computing on the worker to yield at
//! its next safe point, so a program that just arrived is seen within microseconds.
//!
//! The executor is a channel and a table of tasks rather than a tokio runtime with a `LocalSet`,
//! so that an idle worker can look for work a little before it sleeps: on a 2-vCPU virtual
//! machine, waking a sleeping thread (its vCPU halted) made handing a `(+ 1 2)` evaluation to a
//! worker and back take about 100 µs at the median, with the spin 12 µs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::task::{Context, Wake, Waker};
use std::time::{Duration, Instant};

use prometheus_client::metrics::histogram::Histogram;

use tokio::sync::oneshot;

use super::run_queue::RunQueue;

/// A program to start on a worker: called there, it makes the future the worker runs.
type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// What a worker thread is told: start a job for a party, or poll task `n` again.
enum Message {
    Start(Job, Arc<str>),
    Wake(usize),
}

struct Worker {
    inbox: mpsc::Sender<Message>,
    programs: Arc<AtomicUsize>,
    /// Set with every message: the program computing on the worker yields at its next safe
    /// point, so the worker takes the message in and chooses again ([`ptc_lisp::yield_when`]).
    wanted: Arc<AtomicBool>,
}

/// A task of a worker: its future, whose computing time it counts to, since when it is in line
/// (`None`: not in line), and its waker once it was first polled (one per task, not per poll).
struct Task {
    future: Pin<Box<dyn Future<Output = ()>>>,
    party: Arc<str>,
    ready_since: Option<Instant>,
    waker: Option<Waker>,
}

/// Wakes task `task` of a worker by telling the worker.
struct TaskWaker {
    task: usize,
    inbox: mpsc::Sender<Message>,
    wanted: Arc<AtomicBool>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        tell(&self.inbox, &self.wanted, Message::Wake(self.task));
    }
}

/// Sends `message` to a worker and asks the program computing there to yield: after the send,
/// so that the worker, which clears the flag before it reads its inbox, finds the message.
fn tell(inbox: &mpsc::Sender<Message>, wanted: &AtomicBool, message: Message) -> bool {
    let sent = inbox.send(message).is_ok();
    wanted.store(true, Ordering::Release);
    sent
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

/// A worker thread's loop: its tasks, each polled when it starts and whenever woken, in the
/// order [`RunQueue`] gives, until the host drops its side of the channel. `ready_wait` observes
/// how long each ready task waited for its turn.
fn work(
    inbox: mpsc::Receiver<Message>,
    to_self: mpsc::Sender<Message>,
    wanted: Arc<AtomicBool>,
    ready_wait: Histogram,
) {
    ptc_lisp::yield_when(wanted.clone());
    let mut tasks: Vec<Option<Task>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut line: RunQueue<usize> = RunQueue::default();
    loop {
        // Cleared before the inbox is read: a message sent after this sets it again, and the
        // program polled below yields for it.
        wanted.swap(false, Ordering::AcqRel);
        // Everything that arrived, so that the choice below sees every ready program.
        loop {
            match inbox.try_recv() {
                Ok(m) => take_in(m, &mut tasks, &mut free, &mut line),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        }
        let Some((party, n)) = line.next() else {
            match next(&inbox) {
                Some(m) => {
                    take_in(m, &mut tasks, &mut free, &mut line);
                    continue;
                }
                None => return,
            }
        };
        let Some(Some(task)) = tasks.get_mut(n) else {
            line.ran(&party, Duration::ZERO);
            continue;
        };
        if let Some(since) = task.ready_since.take() {
            ready_wait.observe(since.elapsed().as_secs_f64());
        }
        let waker = task.waker.get_or_insert_with(|| {
            Waker::from(Arc::new(TaskWaker {
                task: n,
                inbox: to_self.clone(),
                wanted: wanted.clone(),
            }))
        });
        let started = Instant::now();
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            task.future
                .as_mut()
                .poll(&mut Context::from_waker(waker))
                .is_ready()
        }))
        .unwrap_or(true);
        line.ran(&party, started.elapsed());
        if done {
            tasks[n] = None;
            free.push(n);
            line.leave(&party);
        }
    }
}

/// Takes in one message: a new task joins its party and is ready; a woken one is ready unless
/// it already is.
fn take_in(
    message: Message,
    tasks: &mut Vec<Option<Task>>,
    free: &mut Vec<usize>,
    line: &mut RunQueue<usize>,
) {
    let n = match message {
        Message::Start(job, party) => {
            let task = Task {
                future: job(),
                party,
                ready_since: None,
                waker: None,
            };
            line.join(&task.party);
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
    // A wake for a task that finished (or for an earlier task of a reused slot) polls nothing
    // or polls once more than needed, which a future allows.
    if let Some(Some(task)) = tasks.get_mut(n)
        && task.ready_since.is_none()
    {
        task.ready_since = Some(Instant::now());
        line.ready(&task.party, n);
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
    /// `n` worker threads (at least one); `ready_wait` observes how long ready programs wait
    /// for their turn on them.
    pub fn new(n: usize, ready_wait: Histogram) -> std::io::Result<Self> {
        let mut workers = Vec::new();
        for i in 0..n.max(1) {
            let (inbox, rx) = mpsc::channel::<Message>();
            let to_self = inbox.clone();
            let ready_wait = ready_wait.clone();
            let wanted = Arc::new(AtomicBool::new(false));
            let for_thread = wanted.clone();
            std::thread::Builder::new()
                .name(format!("ptc-eval-{i}"))
                .spawn(move || work(rx, to_self, for_thread, ready_wait))?;
            workers.push(Worker {
                inbox,
                programs: Arc::default(),
                wanted,
            });
        }
        Ok(Workers { workers })
    }

    /// Runs the future `make` builds on a worker thread for `party` (whose computing time it
    /// counts to) and gives back its output; `None` if the worker stopped before the future
    /// finished (it panicked, or the host is shutting down).
    pub async fn run<T, F>(
        &self,
        party: Arc<str>,
        make: impl FnOnce() -> F + Send + 'static,
    ) -> Option<T>
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
        if !tell(&worker.inbox, &worker.wanted, Message::Start(job, party)) {
            return None;
        }
        rx.await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workers(n: usize) -> Workers {
        Workers::new(n, Histogram::new([0.001])).unwrap()
    }

    fn party(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[tokio::test]
    async fn work_runs_on_the_worker_threads_and_comes_back() {
        let workers = workers(2);
        let name = workers
            .run(party("p"), || async {
                std::thread::current().name().map(String::from)
            })
            .await
            .unwrap();
        assert!(name.unwrap().starts_with("ptc-eval-"));
    }

    #[tokio::test]
    async fn zero_workers_asked_is_one() {
        assert_eq!(workers(0).run(party("p"), || async { 7 }).await, Some(7));
    }

    #[tokio::test]
    async fn a_waiting_job_leaves_its_thread_to_the_others() {
        // One thread; the first job waits for the second, which can only run if the first
        // left the thread while it waited.
        let workers = Arc::new(workers(1));
        let (tx, rx) = oneshot::channel::<u8>();
        let w = workers.clone();
        let first =
            tokio::spawn(async move { w.run(party("p"), || async { rx.await.unwrap() }).await });
        let second = workers
            .run(party("p"), move || async move {
                tx.send(7).unwrap();
                1u8
            })
            .await;
        assert_eq!(second, Some(1));
        assert_eq!(first.await.unwrap(), Some(7));
    }

    #[tokio::test]
    async fn new_work_goes_to_the_least_busy_worker() {
        let workers = Arc::new(workers(2));
        let (started_tx, started) = oneshot::channel::<Option<String>>();
        let (release, rx) = oneshot::channel::<()>();
        let w = workers.clone();
        let busy = tokio::spawn(async move {
            w.run(party("p"), || async {
                let _ = started_tx.send(std::thread::current().name().map(String::from));
                rx.await.unwrap();
            })
            .await
        });
        let first = started.await.unwrap();
        let other = workers
            .run(party("p"), || async {
                std::thread::current().name().map(String::from)
            })
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
        let workers = workers(1);
        let r: Option<u8> = workers.run(party("p"), || async { panic!("a bug") }).await;
        assert_eq!(r, None);
        assert_eq!(workers.run(party("p"), || async { 5u8 }).await, Some(5));
    }

    /// A worker with nothing to do sleeps on its inbox after its short spin: it does not keep a
    /// CPU busy.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn an_idle_worker_sleeps() {
        let workers = workers(1);
        // `/proc/thread-self` names the worker's own task (`<pid>/task/<tid>`).
        let task = workers
            .run(party("p"), || async {
                std::fs::read_link("/proc/thread-self")
            })
            .await
            .unwrap()
            .unwrap();
        let stat = std::path::Path::new("/proc").join(task).join("stat");
        let state = || {
            let s = std::fs::read_to_string(&stat).unwrap();
            s.rsplit_once(") ").unwrap().1.chars().next().unwrap()
        };
        let since = Instant::now();
        while state() != 'S' {
            assert!(
                since.elapsed() < Duration::from_secs(10),
                "the idle worker is still {}",
                state()
            );
            tokio::task::yield_now().await;
        }
    }

    /// A task woken by value (`Waker::wake`, as timers and sockets do) from another thread is
    /// polled again.
    #[tokio::test]
    async fn a_task_woken_by_value_from_another_thread_runs_again() {
        let workers = workers(1);
        let slot: Arc<std::sync::Mutex<Option<Waker>>> = Arc::default();
        let kept = slot.clone();
        let waking = std::thread::spawn(move || {
            loop {
                if let Some(w) = slot.lock().unwrap().take() {
                    w.wake();
                    return;
                }
                std::thread::yield_now();
            }
        });
        let mut polls = 0;
        let run = workers.run(party("p"), move || {
            std::future::poll_fn(move |cx| {
                polls += 1;
                if polls == 1 {
                    *kept.lock().unwrap() = Some(cx.waker().clone());
                    return std::task::Poll::Pending;
                }
                std::task::Poll::Ready(polls)
            })
        });
        let polls = tokio::time::timeout(std::time::Duration::from_secs(30), run)
            .await
            .expect("woken, it ran again");
        assert_eq!(polls, Some(2));
        waking.join().unwrap();
    }

    /// Computes in turns: each poll is one turn (counted), after which it lets the others run,
    /// as an evaluation does at the end of its time slice; until `stop`.
    struct Spinner {
        turns: Arc<AtomicUsize>,
        stop: Arc<AtomicBool>,
    }

    impl Future for Spinner {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> std::task::Poll<()> {
            if self.stop.load(Ordering::Acquire) {
                return std::task::Poll::Ready(());
            }
            self.turns.fetch_add(1, Ordering::AcqRel);
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }

    /// One party's four long computations on the one thread, and another party's short program
    /// arriving while they are mid-computation: it runs next, before any of them takes another
    /// turn, and they all go on afterwards.
    #[tokio::test]
    async fn a_light_program_runs_next_while_heavy_ones_compute() {
        let workers = Arc::new(workers(1));
        let turns = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut heavy = Vec::new();
        for _ in 0..4 {
            let w = workers.clone();
            let spinner = Spinner {
                turns: turns.clone(),
                stop: stop.clone(),
            };
            heavy.push(tokio::spawn(async move {
                w.run(party("heavy"), move || spinner).await
            }));
        }
        while turns.load(Ordering::Acquire) < 1_000 {
            tokio::task::yield_now().await;
        }
        let (t, s) = (turns.clone(), turns.clone());
        let (seen, ran) = workers
            .run(party("light"), move || {
                // Taken in by the worker: the heavy turns so far.
                let seen = t.load(Ordering::Acquire);
                async move { (seen, s.load(Ordering::Acquire)) }
            })
            .await
            .unwrap();
        assert_eq!(ran, seen, "heavy turns ran before the light program");
        assert!(heavy.iter().all(|h| !h.is_finished()), "still computing");
        let before = turns.load(Ordering::Acquire);
        while turns.load(Ordering::Acquire) < before + 100 {
            tokio::task::yield_now().await;
        }
        stop.store(true, Ordering::Release);
        for h in heavy {
            assert_eq!(h.await.unwrap(), Some(()));
        }
    }
}
