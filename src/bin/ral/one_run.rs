//! One `ral plan` or `ral apply` on one host (this machine or a target):
//! the library prepares the plan, and this prints it, or applies it and
//! prints each task as it ends and the summary or the JSON report.

use std::collections::HashSet;
use std::io::{self, Write};
use std::time::Instant;

use ral::converge::apply::Events;
use ral::converge::catalog::Catalog;
use ral::converge::plan::{Plan, PlanState, TaskState};
use ral::converge::run::{self, Input, Prepared, StoreAt};
use ral::render::human::Style;
use ral::render::plan as render;

use crate::converge_args::{options, ConvergeArgs, Ending, Mode};
use crate::render::Vars;
use crate::{confirm, progress};

/// What a run is given to converge to.
pub enum Given<'i> {
    /// Shared by the targets of a fleet, each of which makes its catalog
    /// from it.
    Shared(&'i Input),
    /// This machine's alone: its declarations are let go once the catalog
    /// is made (see [`run::prepare_once`]).
    Alone(&'i mut Input),
}

/// What `ral agent` learns of a run as it goes (`ral plan` and `ral
/// apply` watch none).
pub trait Observer {
    /// The run's catalog and plan, once made, before any task runs.
    fn planned(&self, catalog: &Catalog, plan: &Plan);
    /// Tasks that ended or whose resources were read back: what they are
    /// about may have changed just now.
    fn touched(&self, catalog: &Catalog, plan: &Plan, tasks: &[usize]);
    /// The run is over (a plan only: once made).
    fn ended(&self, catalog: &Catalog, plan: &Plan);
}

/// One command's run, on this machine or one target.
pub struct Run<'a> {
    pub args: &'a ConvergeArgs,
    pub mode: Mode,
    pub started: Instant,
    /// The variables the manifests are rendered with.
    pub vars: &'a Vars,
    /// Where an apply's report is kept for the page of a run over many
    /// targets (`--report` with -t/-i), instead of making a page of its
    /// own.
    pub kept: Option<&'a std::sync::OnceLock<ral::converge::report::Report>>,
    /// Who starts the run when not a person (`ral agent`): recorded with
    /// it, and a plan is then recorded too.
    pub origin: Option<run::RunOrigin>,
    pub observer: Option<&'a (dyn Observer + Sync)>,
}

impl<'a> Run<'a> {
    /// A person's run: its report not kept for a page of many targets,
    /// no origin recorded, nothing observing it.
    pub fn new(args: &'a ConvergeArgs, mode: Mode, started: Instant, vars: &'a Vars) -> Run<'a> {
        Run {
            args,
            mode,
            started,
            vars,
            kept: None,
            origin: None,
            observer: None,
        }
    }

    /// Plans (and, for apply, converges) `host`'s system to `input` with
    /// the store `store_at`, writing the output to `out`. The manifests
    /// are first rendered for the host (`target`, or this machine).
    pub fn converge(
        &self,
        input: Given<'_>,
        target: Option<&str>,
        host: &ral::Host,
        registry: &ral::discovery::Registry,
        store_at: &StoreAt,
        out: &mut dyn Write,
    ) -> anyhow::Result<Ending> {
        let reading = match &input {
            Given::Shared(input) => &input.reading,
            Given::Alone(input) => &input.reading,
        };
        let Some(rendered) = self.vars.render(reading, target, host, registry)? else {
            return self.converge_rendered(input, host, registry, store_at, out);
        };
        if self.args.verbose && !self.args.json {
            crate::render::print_provenance(out, &rendered.provenance)?;
        }
        let marked = ral::templating::sensitive_registry(registry, &rendered);
        let mut input = match input {
            Given::Shared(input) => crate::render::rendered_input(input, rendered.declared, None),
            Given::Alone(input) => {
                let saved = input.saved.take();
                crate::render::rendered_input(input, rendered.declared, saved)
            }
        };
        let registry = marked.as_ref().unwrap_or(registry);
        self.converge_rendered(Given::Alone(&mut input), host, registry, store_at, out)
    }

    fn converge_rendered(
        &self,
        input: Given<'_>,
        host: &ral::Host,
        registry: &ral::discovery::Registry,
        store_at: &StoreAt,
        out: &mut dyn Write,
    ) -> anyhow::Result<Ending> {
        let mut options = options(self.args, self.mode);
        options.origin = self.origin.clone();
        let mut prepared = match input {
            Given::Shared(input) => run::prepare(host, registry, store_at, input, options)?,
            Given::Alone(input) => run::prepare_once(host, registry, store_at, input, options)?,
        };
        let style = Style {
            color: !self.args.json && crate::use_color(),
        };
        if let Some(observer) = self.observer {
            observer.planned(&prepared.catalog, &prepared.plan);
        }
        match self.mode {
            Mode::Plan => {
                let ending = self.print_plan(&prepared, host, style, out)?;
                if self.origin.is_some() {
                    prepared.record_noop()?;
                }
                if let Some(observer) = self.observer {
                    observer.ended(&prepared.catalog, &prepared.plan);
                }
                Ok(ending)
            }
            Mode::Apply => {
                if !self.approved(&prepared, style, out)? {
                    return Ok(Ending {
                        cancelled: true,
                        ..Ending::default()
                    });
                }
                self.apply(&mut prepared, host, style, out)
            }
        }
    }

    fn print_plan(
        &self,
        prepared: &Prepared,
        host: &ral::Host,
        style: Style,
        mut out: &mut dyn Write,
    ) -> anyhow::Result<Ending> {
        let args = self.args;
        if !args.json {
            render::forgotten(&mut out, &prepared.forget, "is")?;
        }
        if let Some(file) = &args.out {
            prepared.save(file, host.root())?;
        }
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&prepared.report())?)?;
        } else {
            // Text alone: the JSON document, most of a large plan's time
            // and memory, is not made.
            render::preview(&mut out, &prepared.catalog, &prepared.plan, style)?;
        }
        out.flush()?;
        Ok(prepared.planned().into())
    }

    /// Whether the plan may be applied: on a terminal, a plan that
    /// removes anything is shown first and applied only when the person
    /// answers yes (see [`confirm`]).
    fn approved(
        &self,
        prepared: &Prepared,
        style: Style,
        mut out: &mut dyn Write,
    ) -> anyhow::Result<bool> {
        let removals = confirm::removals(&prepared.catalog, &prepared.plan);
        if removals == 0 || !confirm::asks(self.args, prepared.input()) {
            return Ok(true);
        }
        render::forgotten(&mut out, &prepared.forget, "is")?;
        render::preview(&mut out, &prepared.catalog, &prepared.plan, style)?;
        let yes = confirm::removals_approved(out, &mut io::stdin().lock(), removals)?;
        if !yes {
            writeln!(out, "Apply cancelled; nothing was changed.")?;
        }
        Ok(yes)
    }

    fn apply(
        &self,
        prepared: &mut Prepared,
        host: &ral::Host,
        style: Style,
        out: &mut dyn Write,
    ) -> anyhow::Result<Ending> {
        let json = self.args.json;
        let mut printer = TaskLines::new(out, style, json);
        printer.observer = self.observer;
        // A stop request now lets the running tasks finish.
        ral::process::forward_interrupts_graceful();
        let stop = || ral::process::stop_requested().is_some();
        let outcome = match progress::for_run(self.args, &prepared.plan) {
            Some(progress) => {
                let mut shown = progress::Shown {
                    progress,
                    inner: &mut printer,
                };
                prepared.apply(host, &stop, &mut shown)?
            }
            None => prepared.apply(host, &stop, &mut printer)?,
        };
        // The run is over: output that cannot be written changes no status.
        let TaskLines { out, error, .. } = printer;
        let written = error.map_or(Ok(()), Err).and_then(|()| {
            if json {
                writeln!(out, "{}", serde_json::to_string(&prepared.report())?)?;
            } else {
                let seconds = self.started.elapsed().as_secs_f64();
                writeln!(out, "{}", render::run_summary(&prepared.plan, seconds))?;
            }
            out.flush()
        });
        if let Err(e) = written {
            if e.kind() != io::ErrorKind::BrokenPipe {
                log::error!("writing the report: {e}");
            }
        }
        if let Some(observer) = self.observer {
            observer.ended(&prepared.catalog, &prepared.plan);
        }
        let mut ending = Ending::from(outcome);
        if let Some(kept) = self.kept {
            // The fleet's page is written once every target is over.
            let _ = kept.set(prepared.report());
        } else if let Some(file) = &self.args.report {
            let when = std::time::SystemTime::now() - self.started.elapsed();
            if let Err(e) = crate::report_file::write(file, &prepared.report(), when) {
                // The run is made and recorded; only the page is missing.
                // A failure, not "nothing ran": a script must not run it
                // again for that.
                log::error!("{e:#}");
                ending.failures = true;
            }
        }
        Ok(ending)
    }
}

/// Prints one line per task once its state is final (text only; JSON is
/// one document at the end), and the plan's stop on stderr. A task whose
/// resource is read back after it succeeded is final only then: its line
/// waits for the reading, so that it never says Success and then Failed.
pub struct TaskLines<'a> {
    pub out: &'a mut dyn Write,
    pub style: Style,
    pub json: bool,
    pub error: Option<io::Error>,
    /// Tasks whose lines wait, in the order they ended: each with whether
    /// it still waits to be read back (else it waits for the line of a
    /// task it requires, so that lines keep the order of the plan's
    /// dependencies).
    held: Vec<(usize, bool)>,
    /// The tasks of `held`, to tell at once whether one is (a plan of
    /// thousands of tasks holds thousands of lines).
    holding: HashSet<usize>,
    /// Told of every task that ended or was read back.
    pub observer: Option<&'a (dyn Observer + Sync)>,
}

impl<'a> TaskLines<'a> {
    pub fn new(out: &'a mut dyn Write, style: Style, json: bool) -> TaskLines<'a> {
        TaskLines {
            out,
            style,
            json,
            error: None,
            held: Vec::new(),
            holding: HashSet::new(),
            observer: None,
        }
    }

    /// Prints the lines of `tasks`, final now.
    fn print_ended(&mut self, catalog: &Catalog, plan: &Plan, tasks: &[usize]) {
        let style = self.style;
        for &task in tasks {
            self.write(|mut out| render::task_ended(&mut out, catalog, plan, task, style));
        }
    }
}

impl TaskLines<'_> {
    fn write(&mut self, print: impl FnOnce(&mut dyn Write) -> io::Result<()>) {
        if self.json || self.error.is_some() {
            return;
        }
        if let Err(e) = print(&mut self.out).and_then(|()| self.out.flush()) {
            self.error = Some(e);
        }
    }
}

impl Events for TaskLines<'_> {
    fn plan_state(&mut self, catalog: &Catalog, plan: &Plan) {
        // Over without being read back (a second interrupt): as they are.
        if matches!(
            plan.state,
            PlanState::Successful | PlanState::Failed | PlanState::Stopped
        ) {
            let held: Vec<usize> = self.held.drain(..).map(|(task, _)| task).collect();
            self.holding.clear();
            self.print_ended(catalog, plan, &held);
        }
        if plan.state == PlanState::Stopping {
            let running = plan.count_state(TaskState::Running);
            log::warn!(
                "stopping: no new task starts; waiting for {running} running task(s) \
                 (a second interrupt ends them)"
            );
        }
    }

    fn task_started(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
        let task = &plan.tasks[task];
        log::info!("started {}", catalog.items[task.item].reference());
    }

    fn task_ended(&mut self, catalog: &Catalog, plan: &Plan, task: usize) {
        if let Some(observer) = self.observer {
            observer.touched(catalog, plan, &[task]);
        }
        if self.holding.contains(&task) {
            // Failed by its reading back: printed with the others read.
            return;
        }
        let ended = &plan.tasks[task];
        let unread =
            ended.state == TaskState::Success && ral::converge::apply::is_verified(catalog, ended);
        let after_held = ended
            .requires
            .iter()
            .any(|before| self.holding.contains(before));
        if unread || after_held {
            self.held.push((task, unread));
            self.holding.insert(task);
            return;
        }
        self.print_ended(catalog, plan, &[task]);
    }

    fn tasks_verified(&mut self, catalog: &Catalog, plan: &Plan, tasks: &[usize]) {
        if let Some(observer) = self.observer {
            observer.touched(catalog, plan, tasks);
        }
        let read: HashSet<usize> = tasks.iter().copied().collect();
        let mut now = Vec::new();
        // In the order they ended: what a task waits for comes first.
        for (task, unread) in std::mem::take(&mut self.held) {
            let unread = unread && !read.contains(&task);
            let waits = plan.tasks[task]
                .requires
                .iter()
                .any(|before| self.holding.contains(before));
            if unread || waits {
                self.held.push((task, unread));
            } else {
                self.holding.remove(&task);
                now.push(task);
            }
        }
        self.print_ended(catalog, plan, &now);
    }

    fn forgotten(&mut self, items: &[ral::converge::state::StoredItem]) {
        self.write(|mut out| render::forgotten(&mut out, items, "was"));
    }
}
