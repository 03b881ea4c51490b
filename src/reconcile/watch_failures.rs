//! What a failing watch says in the log. Every watch here retries with backoff for ever, so a
//! failure is said once when a run of failures starts (not at each retry), as a sentence (kube's
//! own text of an API error carries a debug dump of the answer), and not at all once the process
//! is stopping (its client's connections are closing under the watches).

use std::sync::atomic::{AtomicBool, Ordering};

use kube::runtime::watcher;

use super::error::kube_sentence;

static STOPPING: AtomicBool = AtomicBool::new(false);

/// The process is stopping: a watch failing from now on is not news.
pub fn process_stopping() {
    STOPPING.store(true, Ordering::Relaxed);
}

/// A watch's failure as a sentence: the Kubernetes error under it as [`kube_sentence`] says it,
/// or the error the API server sent in the watch stream.
pub fn sentence(e: &watcher::Error) -> String {
    use watcher::Error as W;
    match e {
        W::InitialListFailed(k) | W::WatchStartFailed(k) | W::WatchFailed(k) => kube_sentence(k),
        W::WatchError(s) => format!(
            "the Kubernetes API ended the watch: {} {}: {}",
            s.code,
            s.reason,
            s.message.trim()
        ),
        other => other.to_string(),
    }
}

/// The failures of one watch.
#[derive(Debug, Default)]
pub struct WatchFailures {
    failing: bool,
}

impl WatchFailures {
    /// Note what the watch yielded: the sentence to log when it is the first failure of a run.
    /// `Init` starts every attempt to list, the failed ones too, so it ends no run; any other
    /// event does.
    pub fn note<K>(&mut self, ev: &Result<watcher::Event<K>, watcher::Error>) -> Option<String> {
        match ev {
            Ok(watcher::Event::Init) => None,
            Ok(_) => {
                self.failing = false;
                None
            }
            Err(e) => {
                let first = !std::mem::replace(&mut self.failing, true);
                (first && !STOPPING.load(Ordering::Relaxed)).then(|| sentence(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> Result<watcher::Event<()>, watcher::Error> {
        Err(watcher::Error::InitialListFailed(kube::Error::Api(Box::new(
            kube::core::Status {
                status: Some(kube::core::response::StatusSummary::Failure),
                code: 403,
                message: "connections.quartet.dev is forbidden: User \"system:serviceaccount:q:q\" cannot list resource \"connections\" in API group \"quartet.dev\" at the cluster scope".into(),
                metadata: None,
                reason: "Forbidden".into(),
                details: None,
            },
        ))))
    }

    #[test]
    fn a_run_of_failures_is_said_once_and_a_retry_that_lists_again_ends_it() {
        let mut f = WatchFailures::default();
        assert_eq!(
            f.note(&refused()).as_deref(),
            Some("forbidden: the operator's ServiceAccount q/q may not list connections (API group quartet.dev) at the cluster scope")
        );
        // Each retry starts with `Init`, then fails again: still the same run.
        assert_eq!(f.note(&Ok(watcher::Event::<()>::Init)), None);
        assert_eq!(f.note(&refused()), None);
        // A list that completes ends it; the next failure is said again.
        assert_eq!(f.note(&Ok(watcher::Event::<()>::InitDone)), None);
        assert!(f.note(&refused()).is_some());
    }
}
