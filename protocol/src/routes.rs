//! A daemon's API as a table of routes, each with the roles that may call it.
//!
//! Every route of every daemon is added through [`Api::route`], which takes
//! the roles with the handler: a route cannot be added without saying who
//! may call it, and the role check ([`crate::require`]) is put on it there.
//! The table travels with the router ([`Served`]); each daemon answers it at
//! `GET /v1/routes` (admins only), and the authorization test asks every
//! daemon of a pool for its table and calls every route as every role,
//! checking the refusals. A route added tomorrow is in the table, so in the
//! test, without anyone remembering to add it.

use axum::Router;
use axum::routing::MethodRouter;
use http::Method;
use serde::{Deserialize, Serialize};

use crate::auth::{Auth, require};
use crate::trust::Role;
use crate::verify::Caller;

/// One route: its method, its path as the router has it (`/v1/job/{id}`),
/// and the roles that may call it (an admin passes where a user does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSpec {
    /// `GET`, `POST`, `PUT`.
    pub method: String,
    /// The path, with `{name}` for each parameter.
    pub path: String,
    /// Who may call it.
    pub roles: Vec<Role>,
}

/// Routes being added, with their state type `S`.
pub struct Api<S> {
    router: Router<S>,
    table: Vec<RouteSpec>,
}

impl<S: Clone + Send + Sync + 'static> Default for Api<S> {
    fn default() -> Self {
        Api::new()
    }
}

impl<S: Clone + Send + Sync + 'static> Api<S> {
    /// No routes yet.
    pub fn new() -> Api<S> {
        Api { router: Router::new(), table: Vec::new() }
    }

    /// Adds `method path`, served by `handler` (an axum method router such
    /// as `get(f)`, for that one method), for callers of `roles` alone.
    pub fn route(
        mut self,
        method: Method,
        path: &str,
        roles: &[Role],
        handler: MethodRouter<S>,
    ) -> Api<S> {
        self.router = self.router.route(path, handler.route_layer(require(roles)));
        self.table.push(RouteSpec {
            method: method.as_str().to_string(),
            path: path.to_string(),
            roles: roles.to_vec(),
        });
        self
    }

    /// The routes behind `auth` (signed requests), with `state`.
    pub fn finish(self, auth: &Auth, state: S) -> Served {
        Served { router: self.router.layer(auth.layer()).with_state(state), table: self.table }
    }
}

/// Routes ready to serve, with their table.
pub struct Served {
    /// The routes, behind authentication.
    pub router: Router,
    /// Who may call each.
    pub table: Vec<RouteSpec>,
}

impl Served {
    /// Both `self`'s routes and `other`'s.
    pub fn merge(mut self, other: Served) -> Served {
        self.router = self.router.merge(other.router);
        self.table.extend(other.table);
        self
    }

    /// The router, with `GET /v1/routes` answering the table to admins (the
    /// route itself in it).
    pub fn into_router(mut self, auth: &Auth) -> Router {
        self.table.push(RouteSpec {
            method: "GET".into(),
            path: "/v1/routes".into(),
            roles: vec![Role::Admin],
        });
        let table = std::sync::Arc::new(self.table);
        let routes = Router::new()
            .route(
                "/v1/routes",
                axum::routing::get(move |_caller: Caller| {
                    let t = table.clone();
                    async move { axum::Json((*t).clone()) }
                })
                .route_layer(require(&[Role::Admin])),
            )
            .layer(auth.layer());
        self.router.merge(routes)
    }
}
