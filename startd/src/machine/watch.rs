//! The startd's evaluator, which says whose job ad it is about to evaluate.
//!
//! Every expression the startd evaluates goes through [`Watched`], so a
//! daemon that keeps a journal of what it evaluates (the execute host does,
//! see `andes_host`'s quarantine) learns, before each evaluation that
//! involves a job's ad (as MY or as TARGET), which job that is: by
//! construction, no evaluation of a job's ad is missed. The watcher hears
//! of a job only when it changes, so a policy round over a slot costs one
//! call, not one per expression.

use classad::{ClassAd, EvalOptions, Evaluator, Expr, Value};

/// What hears which job's ad the startd evaluates: `Some(ad)` before the
/// first evaluation of a job's ad (one with a `GlobalJobId`), `None` once
/// [`crate::Startd::handle`] is done with it.
pub type Watcher = Box<dyn FnMut(Option<&ClassAd>) + Send>;

/// An [`Evaluator`] that reports the job ads it evaluates to a [`Watcher`].
pub(super) struct Watched {
    ev: Evaluator,
    watcher: Option<Watcher>,
    /// The `GlobalJobId` last reported.
    current: Option<String>,
}

fn job_id(ad: Option<&ClassAd>) -> Option<&str> {
    match ad?.get(classad::name!("GlobalJobId"))? {
        Expr::Lit(Value::Str(s)) => Some(s),
        _ => None,
    }
}

impl Watched {
    pub(super) fn new(opts: EvalOptions) -> Watched {
        Watched { ev: Evaluator::with_options(opts), watcher: None, current: None }
    }

    pub(super) fn set_watcher(&mut self, w: Option<Watcher>) {
        self.watcher = w;
        self.current = None;
    }

    pub(super) fn set_now(&mut self, now: Option<i64>) {
        self.ev.set_now(now);
    }

    fn note(&mut self, my: Option<&ClassAd>, target: Option<&ClassAd>) {
        let Some(w) = &mut self.watcher else { return };
        let (ad, id) = match (job_id(my), job_id(target)) {
            (Some(id), _) => (my, id),
            (None, Some(id)) => (target, id),
            (None, None) => return,
        };
        if self.current.as_deref() != Some(id) {
            self.current = Some(id.to_string());
            w(ad);
        }
    }

    /// The job is no longer being evaluated.
    pub(super) fn done(&mut self) {
        if let (Some(w), Some(_)) = (&mut self.watcher, self.current.take()) {
            w(None);
        }
    }

    pub(super) fn eval(
        &mut self,
        e: &Expr,
        my: Option<&ClassAd>,
        target: Option<&ClassAd>,
    ) -> Value {
        self.note(my, target);
        self.ev.eval(e, my, target)
    }

    pub(super) fn eval_attr<N: classad::NameRef + ?Sized>(
        &mut self,
        my: &ClassAd,
        target: Option<&ClassAd>,
        name: &N,
    ) -> Value {
        self.note(Some(my), target);
        self.ev.eval_attr(my, target, name)
    }
}
