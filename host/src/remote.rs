//! The handle the daemon's front ends hold: requests to the daemon's task
//! (status, commands, the pool's claims) over a channel, and the slot ads it
//! publishes.

use andes_startd::{ShutdownKind, SlotId, VacateKind};
use classad::{ClassAd, Expr};
use tokio::sync::{mpsc, oneshot};

use crate::pool::claim::{PoolError, PoolReply, PoolRequest};

/// A request from the HTTP API (or any other front end) to the daemon.
pub(crate) enum Request {
    Status(oneshot::Sender<Vec<ClassAd>>),
    Command(Command, oneshot::Sender<Result<String, String>>),
    Pool(PoolRequest, oneshot::Sender<Result<PoolReply, PoolError>>),
}

/// A slot's ad for the collector, with its private part (the slot's current
/// claim id).
#[derive(Clone, Debug)]
pub struct PublishedAd {
    /// The public ad (shared with the daemon's own copy of the slot's ad).
    pub ad: std::sync::Arc<ClassAd>,
    /// The private ad (`ClaimId`).
    pub private: ClassAd,
}

/// A command for the daemon.
#[derive(Clone, Debug)]
pub enum Command {
    /// `andes vacate`: one slot or all.
    Vacate {
        /// The slot, or all.
        slot: Option<SlotId>,
        /// Graceful or fast.
        kind: VacateKind,
    },
    /// `andes drain`: no new claims; running jobs retire (or are vacated at
    /// once) and the slots are Drained. `cancel` opens the machine again.
    Drain {
        /// Graceful or fast.
        kind: VacateKind,
        /// Cancel a drain instead.
        cancel: bool,
    },
    /// `andes checkpoint`: the checkpointable jobs of one slot or all
    /// checkpoint now and run on.
    Checkpoint {
        /// The slot, or all.
        slot: Option<SlotId>,
    },
    /// `andes host off`.
    Off(ShutdownKind),
    /// A graceful `andes host off` that must be over within the given time
    /// (SHUTDOWN_GRACEFUL_TIMEOUT: `andes pool down`, SIGTERM): jobs retire
    /// and vacate as in any graceful shutdown; whatever still runs
    /// [`crate::daemon::SHUTDOWN_REPORT_MARGIN`] before the time is out is
    /// killed (a fast shutdown), so that its shadow still hears how it
    /// ended; once the time is out the daemon waits for no shadow.
    OffWithin(std::time::Duration),
    /// `andes host set-attr`. `KeyboardIdle` and `ConsoleIdle` set this way
    /// count up from the value set until cleared, or until the machine's own
    /// measured activity is more recent.
    SetAttr {
        /// The slot, or all.
        slot: Option<SlotId>,
        /// The attribute.
        name: String,
        /// The expression, or `None` to clear it.
        value: Option<Expr>,
    },
    /// `andes reconfig`: read the configuration again and apply it.
    Reconfig,
}

/// A cloneable way to reach a running [`Daemon`] (what the HTTP API holds).
#[derive(Clone, Debug)]
pub struct Remote {
    pub(crate) tx: mpsc::Sender<Request>,
}

impl Remote {
    /// The latest published ad of every slot, slot 1 first; `None` once the
    /// daemon has stopped.
    pub async fn status(&self) -> Option<Vec<ClassAd>> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Request::Status(tx)).await.ok()?;
        rx.await.ok()
    }

    /// Carries out a command: `Ok` with a message, or `Err` with why the
    /// startd refused it.
    pub async fn command(&self, command: Command) -> Result<String, String> {
        let (tx, rx) = oneshot::channel();
        let stopped = || "the host daemon has stopped".to_string();
        self.tx.send(Request::Command(command, tx)).await.map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    /// Carries out a request of the pool's routes.
    pub async fn pool(&self, req: PoolRequest) -> Result<PoolReply, PoolError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Request::Pool(req, tx)).await.map_err(|_| PoolError::Stopping)?;
        rx.await.map_err(|_| PoolError::Stopping)?
    }
}
