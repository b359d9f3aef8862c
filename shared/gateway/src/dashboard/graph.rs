//! The knowledge graph of a scope, drawn as SVG on the server.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;

use super::{refused, select, shell, signed_in};
use crate::router::AppState;
use crate::web::BaseUrl;

#[derive(Deserialize, Default)]
pub struct GraphQuery {
    scope: Option<String>,
}

/// Nodes drawn at most (the rest are listed as a count).
const MAX_DRAWN: usize = 120;

/// The graph as SVG: nodes on concentric rings (the most connected in the middle), edges
/// as lines, names as labels — all escaped.
pub fn graph_svg(entities: &[(String, String)], relations: &[(String, String, String)]) -> Markup {
    let mut degree: BTreeMap<&str, usize> = entities.iter().map(|(n, _)| (n.as_str(), 0)).collect();
    for (f, _, t) in relations {
        for n in [f, t] {
            if let Some(d) = degree.get_mut(n.as_str()) {
                *d += 1;
            }
        }
    }
    let mut order: Vec<(&str, usize)> = degree.into_iter().collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    order.truncate(MAX_DRAWN);
    let (w, h) = (900.0_f64, 640.0_f64);
    let mut pos: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    let mut placed = 0usize;
    let mut ring = 0usize;
    while placed < order.len() {
        let capacity = if ring == 0 { 1 } else { ring * 8 };
        let radius = ring as f64 * 70.0;
        for k in 0..capacity.min(order.len() - placed) {
            let angle = k as f64 / capacity as f64 * std::f64::consts::TAU + ring as f64 * 0.4;
            pos.insert(order[placed].0, (w / 2.0 + radius * angle.cos(), h / 2.0 + radius * 0.68 * angle.sin()));
            placed += 1;
        }
        ring += 1;
    }
    let types: BTreeMap<&str, &str> = entities.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let palette = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d"];
    let mut kinds: Vec<&str> = types.values().copied().collect();
    kinds.sort_unstable();
    kinds.dedup();
    let color = |t: &str| palette[kinds.iter().position(|k| *k == t).unwrap_or(0) % palette.len()];
    html! {
        svg id="graph" viewBox={ "0 0 " (w) " " (h) } width=(w) height=(h) role="img" aria-label="knowledge graph" {
            @for (f, r, t) in relations {
                @if let (Some(a), Some(b)) = (pos.get(f.as_str()), pos.get(t.as_str())) {
                    line x1=(one(a.0)) y1=(one(a.1)) x2=(one(b.0)) y2=(one(b.1)) stroke="#bbb" {
                        title { (f) " " (r) " " (t) }
                    }
                }
            }
            @for (name, _) in &order {
                @if let Some(&(x, y)) = pos.get(name) {
                    @let t = types.get(name).copied().unwrap_or_default();
                    g class="node" {
                        circle cx=(one(x)) cy=(one(y)) r="7" fill=(color(t)) { title { (name) " (" (t) ")" } }
                        text x=(one(x + 9.0)) y=(one(y + 4.0)) font-size="11" { (name.chars().take(24).collect::<String>()) }
                    }
                }
            }
        }
    }
}

/// A coordinate with one decimal.
fn one(v: f64) -> String {
    format!("{v:.1}")
}

/// `GET /dashboard/graph`.
pub async fn graph(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Query(q): Query<GraphQuery>,
) -> Response {
    let (caller, csrf) = match signed_in(&state, &base, &headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let scope = q.scope.filter(|s| !s.is_empty()).unwrap_or_else(|| "personal".into());
    let mut options = vec![("personal".to_owned(), "personal".to_owned())];
    options.extend(caller.projects.iter().map(|p| (format!("project:{p}"), format!("project {p}"))));
    let opts: Vec<(&str, &str)> = options.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let picker = html! {
        form method="get" action={ (base) "/dashboard/graph" } {
            (select("scope", Some(&scope), &opts))
            button type="submit" id="show-graph" { "Show" }
        }
    };
    match state.services.graph.read_graph(&caller, Some(&scope)).await {
        Ok(g) => {
            let entities: Vec<(String, String)> = g.entities.iter().map(|e| (e.name.clone(), e.entity_type.clone())).collect();
            let relations: Vec<(String, String, String)> =
                g.relations.iter().map(|r| (r.from.clone(), r.relation_type.clone(), r.to.clone())).collect();
            let body = html! {
                (picker)
                p class="muted" id="graph-summary" {
                    (entities.len()) " entities, " (relations.len()) " relations"
                    @if entities.len() > MAX_DRAWN { " — the " (MAX_DRAWN) " most connected are drawn" }
                }
                @if entities.is_empty() {
                    p class="muted" { "This graph is empty." }
                } @else {
                    (graph_svg(&entities, &relations))
                }
            };
            shell(&base, &caller, &csrf, "Knowledge graph", "Graph", html! {}, body)
        }
        Err(e) => refused(&base, &caller, &csrf, "Knowledge graph", "Graph", &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_graph_is_drawn_escaped() {
        let e = vec![("<script>".to_owned(), "x\"y".to_owned()), ("b".to_owned(), "t".to_owned())];
        let svg = graph_svg(&e, &[("<script>".into(), "knows".into(), "b".into())]).into_string();
        assert!(!svg.contains("<script>") && svg.contains("&lt;script&gt;"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 2);
        assert_eq!(svg.matches("<line").count(), 1);
    }
}
