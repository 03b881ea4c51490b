//! The run backend: a background task that moves runs through the states of spec B §3.1.
//!
//! Each run spends `settings.step_ms` in a state before moving on. One run at a time holds a
//! workspace (plan-only runs never do); later runs wait in `pending`. Outcomes follow the
//! workspace's admin scripts: plans have changes unless scripted `no-changes` or `errored`.
//! After a plan with changes, a run passes through the phases switched on for it (cost
//! estimation, policy check, post-plan; see `runs.rs`) and waits for confirmation in the last
//! one, or moves on to `confirmed` by itself when it auto-applies.
//! A no-code upgrade run records the new module version on the workspace once applied, or once
//! its plan finished without changes (nothing left to apply).

use std::sync::Weak;
use std::time::Duration;

use chrono::Utc;

use super::model::*;
use super::Service;

/// Starts the backend; it stops by itself once the service is dropped.
pub fn spawn(svc: Weak<Service>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tick.tick().await;
            let Some(svc) = svc.upgrade() else { return };
            let changed = {
                let mut state = svc.lock();
                step(&mut state)
            };
            if changed {
                svc.save();
            }
        }
    });
}

fn stamp(run: &mut Run, status: &str, step_ms: u64) {
    let now = Utc::now();
    run.status = status.to_string();
    run.status_timestamps
        .insert(format!("{}-at", status.replace('_', "-")), now);
    run.next_step_at = now + chrono::Duration::milliseconds(step_ms as i64);
}

/// Moves every due run one state on. Returns whether anything changed.
pub fn step(state: &mut State) -> bool {
    let now = Utc::now();
    let step_ms = state.settings.step_ms;
    let mut due: Vec<(chrono::DateTime<Utc>, String)> = state
        .runs
        .values()
        .filter(|r| !r.is_final() && r.next_step_at <= now)
        .map(|r| (r.created_at, r.id.clone()))
        .collect();
    due.sort();
    let mut changed = false;
    for (_, id) in due {
        let Some(run) = state.runs.get(&id).cloned() else {
            continue;
        };
        // A run ignoring a non-forceful cancel stays where it is until force-canceled.
        if run.cancel_requested_at.is_some()
            && matches!(run.status.as_str(), "planning" | "applying")
        {
            continue;
        }
        let next: Option<&str> = match run.status.as_str() {
            "pending" => {
                if run.plan_only || may_start(state, &run) {
                    // Workspaces with a VCS repository fetch the configuration first.
                    let vcs = state
                        .workspaces
                        .get(&run.workspace)
                        .is_some_and(|w| w.vcs_repo.is_some());
                    Some(if vcs { "fetching" } else { "plan_queued" })
                } else {
                    None
                }
            }
            "fetching" => Some("plan_queued"),
            "plan_queued" => Some("planning"),
            "planning" => {
                let plan = run.script.plan.as_deref().unwrap_or("changes");
                Some(match plan {
                    "errored" => "errored",
                    "no-changes" if run.allow_empty_apply && !run.plan_only => "planned",
                    "no-changes" => "planned_and_finished",
                    _ if run.plan_only => "planned_and_finished",
                    _ => "planned",
                })
            }
            s if s == crate::workspaces::run::awaiting_status(&run) => {
                if run.auto_apply {
                    Some("confirmed")
                } else {
                    None
                }
            }
            "planned" if run.phases.cost_estimation => Some("cost_estimating"),
            "cost_estimating" => Some("cost_estimated"),
            "planned" | "cost_estimated" if run.phases.policy_check => Some("policy_checking"),
            "policy_checking" => Some("policy_checked"),
            "planned" | "cost_estimated" | "policy_checked" if run.phases.post_plan => {
                Some("post_plan_running")
            }
            "post_plan_running" => Some("post_plan_completed"),
            "confirmed" => Some("apply_queued"),
            "apply_queued" => Some("applying"),
            "applying" => Some(if run.script.apply.as_deref() == Some("errored") {
                "errored"
            } else {
                "applied"
            }),
            _ => None,
        };
        let Some(next) = next else { continue };
        changed = true;
        let mut run = run;
        if next == "plan_queued" {
            run.status_timestamps
                .insert("plan-queueable-at".into(), Utc::now());
        }
        if run.status == "planning" {
            run.has_changes = run.script.plan.as_deref().unwrap_or("changes") == "changes";
        }
        stamp(&mut run, next, step_ms);
        if next == "applied" || (next == "planned_and_finished" && !run.has_changes) {
            on_applied(state, &run);
        }
        state.runs.insert(id, run);
    }
    changed
}

/// Whether a pending run may take the workspace: no other run holds it, no manual lock, and it
/// is the oldest pending run.
fn may_start(state: &State, run: &Run) -> bool {
    let Some(ws) = state.workspaces.get(&run.workspace) else {
        return false;
    };
    if ws.manual_lock.is_some() || super::workspace::locking_run(state, &ws.id).is_some() {
        return false;
    }
    !state.runs.values().any(|r| {
        r.workspace == run.workspace
            && !r.plan_only
            && r.status == "pending"
            && r.created_at < run.created_at
    })
}

fn on_applied(state: &mut State, run: &Run) {
    if let Some((version, vid)) = &run.upgrade_to {
        super::nocode::record_upgrade(state, &run.workspace, version, vid);
    }
    if run.status != "applied" {
        return;
    }
    let Some(ws) = state.workspaces.get_mut(&run.workspace) else {
        return;
    };
    if run.has_changes {
        ws.resource_count = if run.is_destroy {
            0
        } else {
            ws.resource_count.max(1)
        };
    }
    ws.latest_change_at = Utc::now();
}
