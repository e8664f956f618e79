//! Who asks: an [`Actor`] (a user, the schedd, an admin) and what it may
//! read and change; where a submitted ad comes from.

use super::state::*;
use crate::attrs::{self, ROUTED_BY, Reader};

use classad::{ClassAd, Expr, Value};
use serde::{Deserialize, Serialize};

pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// Who asks for a change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The verified identity: the `Owner` of the jobs this actor submits.
    pub name: String,
    /// An admin may act on anyone's jobs.
    pub admin: bool,
    /// Another pool's schedd routing jobs here (HTCondor-C): it submits each
    /// job for the owner its ad names (the schedd's API checks that this
    /// pool trusts that user), recorded as the job's [`ROUTED_BY`], and acts
    /// on the jobs it submitted and no others.
    pub schedd: bool,
}

impl Actor {
    /// A user.
    pub fn user(name: &str) -> Actor {
        Actor { name: name.to_string(), admin: false, schedd: false }
    }
    /// An administrator.
    pub fn admin(name: &str) -> Actor {
        Actor { name: name.to_string(), admin: true, schedd: false }
    }
    /// Another pool's schedd, routing jobs here for their owners.
    pub fn routing_schedd(name: &str) -> Actor {
        Actor { name: name.to_string(), admin: false, schedd: true }
    }

    /// True when this actor may act on `job`: an admin on any, a user on
    /// their own, a routing schedd on those it routed here.
    pub fn may_act_on(&self, job: &JobView<'_>) -> bool {
        if self.admin {
            return true;
        }
        if self.schedd {
            return matches!(
                job.cluster.ad.get(classad::name!(ROUTED_BY)),
                Some(Expr::Lit(Value::Str(s))) if **s == *self.name
            );
        }
        job.owner() == self.name
    }
    /// The schedd itself (policy, shadows): may act on any job.
    pub fn schedd() -> Actor {
        Actor::admin("schedd")
    }
}

/// How `actor` may see job `v`: as its owner (or an admin, or the schedd
/// that routed it here), or as anyone else.
pub fn reader_of(actor: &Actor, v: &JobView<'_>) -> Reader {
    if actor.may_act_on(v) { Reader::Owner } else { Reader::Other }
}

/// Where a submitted ad comes from.
#[derive(Clone, Copy)]
pub(crate) enum Origin {
    /// A request: nothing the schedd sets is kept ([`attrs::strip_submitted`]).
    Outside,
    /// The job router's copy of a job: built here from the original's ad (the
    /// queue's own) and the admin's route; only the original's identity goes.
    Router,
}

impl Origin {
    pub(crate) fn strip(self, ad: &mut ClassAd, by_schedd: bool) {
        match self {
            Origin::Outside => attrs::strip_submitted(ad, by_schedd),
            Origin::Router => {
                for a in [
                    "ClusterId",
                    "ProcId",
                    "Owner",
                    "QDate",
                    "JobStatus",
                    "GlobalJobId",
                    "EnteredCurrentStatus",
                    "ScheddInterval",
                    ROUTED_BY,
                ] {
                    ad.remove(a);
                }
            }
        }
    }
}
