//! A plan and its run as one typed value: what `ral plan --json` and
//! `ral apply --json` print (`schemas/ral-plan.schema.json`), what the
//! state store keeps of each run, and what `ral state` reads back. It is
//! made from the catalog and the plan, with sensitive values redacted by
//! their providers, so nothing made from it can show a secret.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::error::Error;
use crate::provider::ShownChange;
use crate::store::{PlanRecord, RecordedTask};

use super::catalog::Catalog;
use super::plan::{Action, Plan, PlanState, TaskError, TaskState};

/// The whole document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub plan: PlanReport,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    pub id: String,
    pub state: PlanState,
    pub tasks: Vec<TaskReport>,
    pub counts: Counts,
}

/// One task, as the schema's `task`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskReport {
    /// 1-based, in the order the tasks may run.
    pub id: usize,
    /// `TYPE[NAME]`, with the type as the manifest wrote it.
    pub resource: String,
    #[serde(rename = "type")]
    pub type_name: String,
    pub name: String,
    /// The qualified provider name.
    pub provider: String,
    pub action: Action,
    pub changes: Vec<ShownChange>,
    /// The ids of the tasks it waits for.
    pub requires: Vec<usize>,
    pub state: TaskState,
    pub error: Option<TaskError>,
    pub seconds: f64,
    /// Reports stored before drift was recorded lack it.
    #[serde(default)]
    pub drifted: bool,
    /// For a model plugin's task: which plugin, what kind, for which item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginTaskReport>,
    /// For a refresh: the ids of the tasks whose change calls for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refresh_on: Vec<usize>,
    /// For a refresh: an earlier run owes it (its refresh did not succeed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub owed: bool,
    /// A word on how it ended that is no error (a refresh not needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Where a task of a model plugin came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginTaskReport {
    /// The plugin's name.
    pub name: String,
    /// `config`, `callback` or `remote`.
    pub kind: String,
    /// The vpath of the item whose state it settles.
    pub item: String,
    /// The task's id in the plugin's answer.
    pub id: String,
    pub description: String,
}

/// How many tasks do what, and how many ended how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub create: usize,
    pub change: usize,
    pub remove: usize,
    /// Plugins' callbacks and commands (reports stored before plugins
    /// lack it).
    #[serde(default)]
    pub run: usize,
    /// Refreshes (reports stored before refreshes lack it).
    #[serde(default)]
    pub refresh: usize,
    pub unknown: usize,
    /// Resources already as declared: they have no task.
    pub unchanged: usize,
    pub success: usize,
    pub failed: usize,
    pub skipped: usize,
    pub stopped: usize,
    /// What the run did (reports stored before it lack it; reading one
    /// back counts it from its tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<Done>,
}

/// How the tasks ended, by what they did: a task that failed counts as
/// failed, whatever it was to do; one not ended yet is not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {
    pub created: usize,
    pub changed: usize,
    pub removed: usize,
    pub run: usize,
    pub refreshed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub stopped: usize,
}

impl Done {
    /// The tally of tasks given as (action, state, note): a task that
    /// ended with a note (a refresh not needed, a task with nothing left
    /// to do) did nothing and is not counted.
    pub fn of<'t>(
        tasks: impl IntoIterator<Item = (Action, TaskState, Option<&'t String>)>,
    ) -> Done {
        let mut done = Done::default();
        for (action, state, note) in tasks {
            let count = match (state, action) {
                (TaskState::Success, _) if note.is_some() => continue,
                (TaskState::Success, Action::Create) => &mut done.created,
                (TaskState::Success, Action::Change) => &mut done.changed,
                (TaskState::Success, Action::Remove) => &mut done.removed,
                (TaskState::Success, Action::Run) => &mut done.run,
                (TaskState::Success, Action::Refresh) => &mut done.refreshed,
                // An unknown task fails without running; it never succeeds.
                (TaskState::Success, Action::Unknown) => continue,
                (TaskState::Failed, _) => &mut done.failed,
                (TaskState::Skipped, _) => &mut done.skipped,
                (TaskState::Stopped, _) => &mut done.stopped,
                (TaskState::Initial | TaskState::Running, _) => continue,
            };
            *count += 1;
        }
        done
    }

    /// The non-zero counts by name, in order: `[("created", 3), ...]`.
    pub fn named(&self) -> Vec<(&'static str, usize)> {
        [
            ("created", self.created),
            ("changed", self.changed),
            ("removed", self.removed),
            ("run", self.run),
            ("refreshed", self.refreshed),
            ("failed", self.failed),
            ("skipped", self.skipped),
            ("stopped", self.stopped),
        ]
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .collect()
    }
}

impl Counts {
    fn of(tasks: &[TaskReport], unchanged: usize) -> Counts {
        let actions = |action| tasks.iter().filter(|t| t.action == action).count();
        let states = |state| tasks.iter().filter(|t| t.state == state).count();
        Counts {
            create: actions(Action::Create),
            change: actions(Action::Change),
            remove: actions(Action::Remove),
            run: actions(Action::Run),
            refresh: actions(Action::Refresh),
            unknown: actions(Action::Unknown),
            unchanged,
            success: states(TaskState::Success),
            failed: states(TaskState::Failed),
            skipped: states(TaskState::Skipped),
            stopped: states(TaskState::Stopped),
            done: Some(Done::of(
                tasks.iter().map(|t| (t.action, t.state, t.note.as_ref())),
            )),
        }
    }
}

impl Report {
    /// The plan as it stands, its tasks named from the catalog.
    pub fn of(catalog: &Catalog, plan: &Plan) -> Report {
        let tasks: Vec<TaskReport> = plan
            .tasks
            .iter()
            .enumerate()
            .map(|(at, task)| {
                let item = &catalog.items[task.item];
                let provider = item.provider;
                let plugin = item.from_plugin.as_deref().and_then(|from| {
                    let task = from.task()?;
                    Some(PluginTaskReport {
                        name: from.plugin()?.to_owned(),
                        kind: task.kind.as_str().to_owned(),
                        item: task.item.clone(),
                        id: task.id.clone(),
                        description: task.description.clone(),
                    })
                });
                // Unescaped, as for resources: JSON escapes it.
                let resource = match (item.role, &plugin) {
                    (super::catalog::Role::Action, Some(from)) => {
                        format!("{}[{}]", from.kind, item.name())
                    }
                    _ => format!("{}[{}]", item.type_query, item.name()),
                };
                TaskReport {
                    id: Plan::task_id(at),
                    resource,
                    type_name: provider.type_name().to_owned(),
                    name: item.name().to_owned(),
                    provider: provider.qualified_name(),
                    action: task.action,
                    changes: provider.shown_changes(&task.changes),
                    requires: task.requires.iter().map(|&r| Plan::task_id(r)).collect(),
                    state: task.state,
                    error: task.error.clone(),
                    seconds: task.seconds,
                    drifted: task.drifted,
                    plugin,
                    refresh_on: task.refresh_on.iter().map(|&r| Plan::task_id(r)).collect(),
                    owed: task.owed,
                    note: task.note.clone(),
                }
            })
            .collect();
        let counts = Counts::of(&tasks, plan.unchanged);
        Report {
            plan: PlanReport {
                id: plan.id.clone(),
                state: plan.state,
                tasks,
                counts,
            },
        }
    }

    /// The report of a stored plan: as it ended, or (for a plan a crash
    /// cut short, or one a later run found dead and marked Failed) as
    /// planned with the states, errors, changes and times its tasks
    /// recorded. `None` for a plan recorded without one.
    pub fn as_recorded(
        record: &PlanRecord,
        tasks: impl FnOnce() -> Result<Vec<RecordedTask>, Error>,
    ) -> Result<Option<Report>, Error> {
        let Some(text) = &record.report else {
            return Ok(None);
        };
        let damaged = |what: &str, e: serde_json::Error| Error::Io {
            context: format!("plan {}: the stored {what}", record.id),
            error: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        };
        let mut report: Report =
            serde_json::from_str(text).map_err(|e| damaged("report is not a plan's", e))?;
        if record.ended.is_some() && record.state != "Failed" {
            let counts = &mut report.plan.counts;
            if counts.done.is_none() {
                counts.done = Some(Done::of(
                    report
                        .plan
                        .tasks
                        .iter()
                        .map(|t| (t.action, t.state, t.note.as_ref())),
                ));
            }
            return Ok(Some(report));
        }
        let plan = &mut report.plan;
        plan.state = parse_state(&record.state).map_err(|e| damaged("plan state", e))?;
        for row in tasks()? {
            let Some(task) = plan.tasks.iter_mut().find(|t| t.id == row.id) else {
                continue;
            };
            task.state = parse_state(&row.state).map_err(|e| damaged("task state", e))?;
            if let Some(error) = &row.error {
                task.error =
                    Some(serde_json::from_str(error).map_err(|e| damaged("task error", e))?);
            }
            if let Some(changes) = &row.changes {
                task.changes =
                    serde_json::from_str(changes).map_err(|e| damaged("task changes", e))?;
            }
            if let Some(seconds) = row.seconds {
                task.seconds = seconds;
            }
        }
        plan.counts = Counts::of(&plan.tasks, plan.counts.unchanged);
        Ok(Some(report))
    }
}

/// A state as the store writes it (`Success`, `Failed`, ...).
fn parse_state<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    serde_json::from_value(Json::from(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(state: &str, ended: Option<f64>) -> PlanRecord {
        let report = serde_json::json!({"plan": {
            "id": "p1", "state": "Running",
            "tasks": [
                {"id": 1, "resource": "host[a]", "type": "host", "name": "a",
                 "provider": "host::etc", "action": "create", "changes": [],
                 "requires": [], "state": "Initial", "error": null, "seconds": 0.0},
                {"id": 2, "resource": "host[b]", "type": "host", "name": "b",
                 "provider": "host::etc", "action": "change", "changes": [],
                 "requires": [1], "state": "Initial", "error": null, "seconds": 0.0},
            ],
            "counts": {"create": 1, "change": 1, "remove": 0, "unknown": 0, "unchanged": 3,
                       "success": 0, "failed": 0, "skipped": 0, "stopped": 0}}});
        PlanRecord {
            id: "p1".to_owned(),
            manifest_digest: String::new(),
            state: state.to_owned(),
            created: 0.0,
            started: None,
            ended,
            report: Some(report.to_string()),
            origin: None,
        }
    }

    fn row(id: usize, state: &str, error: Option<&str>) -> RecordedTask {
        RecordedTask {
            id,
            resource: String::new(),
            provider: String::new(),
            action: String::new(),
            state: state.to_owned(),
            error: error.map(str::to_owned),
            changes: Some(r#"[{"attr": "ip", "is": "10.0.0.1", "was": null}]"#.to_owned()),
            seconds: Some(1.5),
        }
    }

    #[test]
    fn a_plan_cut_short_is_shown_with_what_its_tasks_recorded_and_counted_again() {
        let error = r#"{"kind": "interrupted", "message": "the process ended"}"#;
        let report = Report::as_recorded(&stored("Failed", Some(9.0)), || {
            Ok(vec![row(1, "Success", None), row(2, "Failed", Some(error))])
        })
        .unwrap()
        .unwrap();
        let plan = &report.plan;
        assert_eq!(plan.state, PlanState::Failed);
        assert_eq!(plan.tasks[0].state, TaskState::Success);
        assert_eq!(plan.tasks[0].seconds, 1.5);
        assert_eq!(plan.tasks[0].changes[0].attr, "ip");
        let failed = plan.tasks[1].error.as_ref().unwrap();
        assert_eq!(failed.kind, super::super::plan::ErrorKind::Interrupted);
        assert_eq!((plan.counts.success, plan.counts.failed), (1, 1));
        // What no task changes is kept.
        assert_eq!((plan.counts.create, plan.counts.unchanged), (1, 3));
    }

    #[test]
    fn an_ended_plan_is_shown_as_it_ended_without_reading_its_tasks() {
        let report = Report::as_recorded(&stored("Successful", Some(9.0)), || {
            panic!("the tasks of an ended plan are not read")
        })
        .unwrap()
        .unwrap();
        assert_eq!(report.plan.state, PlanState::Running);
        assert_eq!(report.plan.counts.success, 0);
        // Stored before outcome counts: they are counted from its tasks
        // (none ended).
        assert_eq!(report.plan.counts.done, Some(Done::default()));
    }

    #[test]
    fn outcome_counts_count_a_failed_create_as_failed_and_no_task_not_ended() {
        let note = "not needed".to_owned();
        let done = Done::of([
            (Action::Create, TaskState::Success, None),
            (Action::Create, TaskState::Failed, None),
            (Action::Change, TaskState::Success, None),
            (Action::Remove, TaskState::Skipped, None),
            (Action::Run, TaskState::Success, None),
            (Action::Unknown, TaskState::Failed, None),
            (Action::Change, TaskState::Stopped, None),
            (Action::Create, TaskState::Initial, None),
            (Action::Create, TaskState::Running, None),
            (Action::Refresh, TaskState::Success, None),
            (Action::Refresh, TaskState::Success, Some(&note)),
        ]);
        assert_eq!(
            done,
            Done {
                created: 1,
                changed: 1,
                removed: 0,
                run: 1,
                refreshed: 1,
                failed: 2,
                skipped: 1,
                stopped: 1,
            }
        );
        assert_eq!(
            done.named(),
            [
                ("created", 1),
                ("changed", 1),
                ("run", 1),
                ("refreshed", 1),
                ("failed", 2),
                ("skipped", 1),
                ("stopped", 1)
            ]
        );
    }

    #[test]
    fn a_damaged_stored_report_is_an_error_naming_the_plan() {
        let mut record = stored("Failed", None);
        record.report = Some(r#"{"plan": {"id": 3}}"#.to_owned());
        let error = Report::as_recorded(&record, || Ok(vec![])).unwrap_err();
        assert!(
            error.to_string().starts_with("plan p1: the stored report"),
            "{error}"
        );
        let record = stored("Exploded", None);
        let error = Report::as_recorded(&record, || Ok(vec![])).unwrap_err();
        assert!(error.to_string().contains("plan state"), "{error}");
    }
}
