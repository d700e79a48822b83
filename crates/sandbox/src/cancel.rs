//! A run's cancel handle: owned by the caller, passed to the backend with the run's sinks.

use std::sync::{Arc, Mutex, PoisonError};

type Waiter = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    cancelled: bool,
    waiters: Vec<Waiter>,
    /// Signals asked for and not yet passed on.
    signals: Vec<i32>,
}

/// Ends a run early (the backend signals the command, then ends the whole sandbox after a
/// grace period), or passes it signals. Clones share the handle: use it from any thread.
#[derive(Clone, Default)]
pub struct Cancel {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Cancels the run: every waiter registered with [`Cancel::on_cancel`] runs once, now.
    pub fn cancel(&self) {
        let waiters = {
            let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            s.cancelled = true;
            std::mem::take(&mut s.waiters)
        };
        for w in waiters {
            w();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .cancelled
    }

    /// Asks the backend to pass signal `sig` to the run's command (soon: backends look at
    /// least every 50 ms).
    pub fn signal(&self, sig: i32) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .signals
            .push(sig);
    }

    /// The signals asked for since the last call, oldest first. For backends.
    pub fn take_signals(&self) -> Vec<i32> {
        std::mem::take(
            &mut self
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .signals,
        )
    }

    /// Runs `f` when the handle is cancelled (at once if it already is). For backends.
    pub fn on_cancel(&self, f: Box<dyn FnOnce() + Send>) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.cancelled {
            drop(s);
            f();
        } else {
            s.waiters.push(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn waiters_run_once_whenever_they_were_registered() {
        let hits = Arc::new(AtomicUsize::new(0));
        let c = Cancel::new();
        let h = hits.clone();
        c.on_cancel(Box::new(move || {
            h.fetch_add(1, Ordering::SeqCst);
        }));
        assert!(!c.is_cancelled());
        c.clone().cancel();
        c.cancel();
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        let h = hits.clone();
        c.on_cancel(Box::new(move || {
            h.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(hits.load(Ordering::SeqCst), 2);
        assert!(c.is_cancelled());
    }
}
