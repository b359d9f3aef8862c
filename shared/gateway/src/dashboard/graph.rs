//! The knowledge graph of a scope, laid out and drawn as SVG on the server: a page of the
//! most connected entities at a time, a force-directed layout snapped to label-sized
//! cells (so no two labels overlap, whatever the graph), and a legend of entity types.

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
    /// 1-based; entities are paged most connected first.
    page: Option<usize>,
}

/// Entities drawn on one page.
pub const PAGE_SIZE: usize = 40;
/// One cell of the grid a node and its label own: the label is cut to fit it.
const CELL_W: f64 = 180.0;
const CELL_H: f64 = 34.0;
/// Room around the grid.
const MARGIN: f64 = 12.0;
/// Characters a label shows (11 px sans-serif; the full name is in its tooltip). At
/// most 7.5 px a character, it ends before the next cell starts.
const LABEL_CHARS: usize = 22;
/// Entity types get these colours in name order (the legend says which).
const PALETTE: [&str; 8] = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d", "#bab0ac"];

/// One node where the layout put it.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    pub name: String,
    pub kind: String,
    /// The node's centre.
    pub x: f64,
    pub y: f64,
}

/// A page of a graph, laid out.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub nodes: Vec<Placed>,
    /// Relations between two nodes of this page (indices into `nodes`), with their type.
    pub edges: Vec<(usize, usize, String)>,
    pub width: f64,
    pub height: f64,
}

/// Lays out `entities` (name, type) joined by `relations` (from, type, to): a
/// Fruchterman–Reingold force layout (deterministic: nodes start on a circle in the
/// order given), then each node, most connected first, takes the free cell of a grid
/// nearest to where the forces put it. A cell holds one node and its label, so labels
/// never overlap, and connected nodes stay near each other.
pub fn lay_out(entities: &[(String, String)], relations: &[(String, String, String)]) -> Layout {
    let n = entities.len();
    let index: BTreeMap<&str, usize> = entities.iter().enumerate().map(|(i, (name, _))| (name.as_str(), i)).collect();
    let edges: Vec<(usize, usize, String)> = relations
        .iter()
        .filter_map(|(f, r, t)| Some((*index.get(f.as_str())?, *index.get(t.as_str())?, r.clone())))
        .filter(|(a, b, _)| a != b)
        .collect();
    if n == 0 {
        return Layout { nodes: Vec::new(), edges, width: 2.0 * MARGIN, height: 2.0 * MARGIN };
    }
    let forced = forces(n, &edges);
    // A grid about as wide as it is tall on screen (cells are 5:1), with a fifth spare
    // cells so the layout's shape survives the snapping.
    let cells = n + n / 5 + 1;
    let cols = ((cells as f64 * CELL_H / CELL_W).sqrt().ceil() as usize).clamp(1, 6).min(n);
    let rows = cells.div_ceil(cols);
    let mut degree = vec![0usize; n];
    for (a, b, _) in &edges {
        degree[*a] += 1;
        degree[*b] += 1;
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|a, b| degree[*b].cmp(&degree[*a]).then(a.cmp(b)));
    let mut taken = vec![false; cols * rows];
    let mut cell_of = vec![0usize; n];
    for i in order {
        let (want_c, want_r) = (forced[i].0 * (cols - 1) as f64, forced[i].1 * (rows - 1) as f64);
        let best = (0..cols * rows)
            .filter(|c| !taken[*c])
            .min_by(|a, b| {
                let d = |c: usize| ((c % cols) as f64 - want_c).powi(2) + ((c / cols) as f64 - want_r).powi(2);
                d(*a).total_cmp(&d(*b)).then(a.cmp(b))
            })
            .unwrap_or(0);
        taken[best] = true;
        cell_of[i] = best;
    }
    let used_rows = cell_of.iter().map(|c| c / cols + 1).max().unwrap_or(1);
    let nodes = entities
        .iter()
        .zip(&cell_of)
        .map(|((name, kind), c)| Placed {
            name: name.clone(),
            kind: kind.clone(),
            x: MARGIN + (c % cols) as f64 * CELL_W + 8.0,
            y: MARGIN + (c / cols) as f64 * CELL_H + CELL_H / 2.0,
        })
        .collect();
    Layout { nodes, edges, width: 2.0 * MARGIN + cols as f64 * CELL_W, height: 2.0 * MARGIN + used_rows as f64 * CELL_H }
}

/// Fruchterman–Reingold on the unit square: each node's position, in `0..=1` on both axes.
fn forces(n: usize, edges: &[(usize, usize, String)]) -> Vec<(f64, f64)> {
    let mut p: Vec<(f64, f64)> = (0..n)
        .map(|i| {
            let a = i as f64 / n as f64 * std::f64::consts::TAU;
            (0.5 + 0.4 * a.cos(), 0.5 + 0.4 * a.sin())
        })
        .collect();
    if n == 1 {
        return vec![(0.5, 0.5)];
    }
    let k = (1.0 / n as f64).sqrt();
    let mut heat = 0.1;
    for _ in 0..200 {
        let mut d = vec![(0.0_f64, 0.0_f64); n];
        for i in 0..n {
            for j in (i + 1)..n {
                let (dx, dy) = (p[i].0 - p[j].0, p[i].1 - p[j].1);
                let dist = (dx * dx + dy * dy).sqrt().max(1e-4);
                let push = k * k / dist;
                d[i].0 += dx / dist * push;
                d[i].1 += dy / dist * push;
                d[j].0 -= dx / dist * push;
                d[j].1 -= dy / dist * push;
            }
        }
        for (a, b, _) in edges {
            let (dx, dy) = (p[*a].0 - p[*b].0, p[*a].1 - p[*b].1);
            let dist = (dx * dx + dy * dy).sqrt().max(1e-4);
            let pull = dist * dist / k;
            d[*a].0 -= dx / dist * pull;
            d[*a].1 -= dy / dist * pull;
            d[*b].0 += dx / dist * pull;
            d[*b].1 += dy / dist * pull;
        }
        for (q, m) in p.iter_mut().zip(&d) {
            let len = (m.0 * m.0 + m.1 * m.1).sqrt().max(1e-9);
            q.0 = (q.0 + m.0 / len * len.min(heat)).clamp(0.0, 1.0);
            q.1 = (q.1 + m.1 / len * len.min(heat)).clamp(0.0, 1.0);
        }
        heat *= 0.97;
    }
    // Stretch to fill the square, so the grid's corners are used too.
    let (min_x, max_x) = p.iter().fold((f64::MAX, f64::MIN), |(lo, hi), q| (lo.min(q.0), hi.max(q.0)));
    let (min_y, max_y) = p.iter().fold((f64::MAX, f64::MIN), |(lo, hi), q| (lo.min(q.1), hi.max(q.1)));
    p.iter().map(|q| ((q.0 - min_x) / (max_x - min_x).max(1e-9), (q.1 - min_y) / (max_y - min_y).max(1e-9))).collect()
}

/// The colour of each entity type (types in name order).
fn colours(layout: &Layout) -> BTreeMap<&str, &'static str> {
    let mut kinds: Vec<&str> = layout.nodes.iter().map(|p| p.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds.into_iter().enumerate().map(|(i, k)| (k, PALETTE[i % PALETTE.len()])).collect()
}

/// A layout as SVG — relations as lines, nodes as dots, names as labels cut to their
/// cell (the whole name, type and relations in tooltips) — all escaped.
pub fn graph_svg(layout: &Layout) -> Markup {
    let colour = colours(layout);
    let (w, h) = (layout.width, layout.height);
    html! {
        svg id="graph" viewBox={ "0 0 " (w) " " (h) } width=(w) height=(h) role="img" aria-label="knowledge graph" {
            @for (a, b, r) in &layout.edges {
                @let (p, q) = (&layout.nodes[*a], &layout.nodes[*b]);
                line x1=(one(p.x)) y1=(one(p.y)) x2=(one(q.x)) y2=(one(q.y)) stroke="#c8c8c8" {
                    title { (p.name) " " (r) " " (q.name) }
                }
            }
            @for p in &layout.nodes {
                g class="node" {
                    circle cx=(one(p.x)) cy=(one(p.y)) r="6" fill=(colour.get(p.kind.as_str()).copied().unwrap_or(PALETTE[0])) {
                        title { (p.name) " (" (p.kind) ")" }
                    }
                    text x=(one(p.x + 10.0)) y=(one(p.y + 4.0)) font-size="11" {
                        title { (p.name) }
                        (label(&p.name))
                    }
                }
            }
        }
    }
}

/// A name cut to [`LABEL_CHARS`] characters, with an ellipsis when cut.
fn label(name: &str) -> String {
    if name.chars().count() <= LABEL_CHARS {
        name.to_owned()
    } else {
        let mut s: String = name.chars().take(LABEL_CHARS - 1).collect();
        s.push('…');
        s
    }
}

/// The legend: each entity type's colour and how many of this page's nodes have it.
fn legend(layout: &Layout) -> Markup {
    let colour = colours(layout);
    html! {
        ul id="legend" class="legend" aria-label="entity types" {
            @for (kind, c) in &colour {
                li {
                    span class="swatch" style={ "background:" (c) } {}
                    (kind) " " span class="muted" { "(" (layout.nodes.iter().filter(|p| p.kind == *kind).count()) ")" }
                }
            }
        }
    }
}

/// A coordinate with one decimal.
fn one(v: f64) -> String {
    format!("{v:.1}")
}

/// `GET /dashboard/graph?scope=&page=`.
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
            let relations: Vec<(String, String, String)> =
                g.relations.iter().map(|r| (r.from.clone(), r.relation_type.clone(), r.to.clone())).collect();
            let p = paged(
                &g.entities.iter().map(|e| (e.name.clone(), e.entity_type.clone())).collect::<Vec<_>>(),
                &relations,
                q.page,
            );
            let layout = lay_out(&p.entities, &relations);
            let scope_q: String = form_urlencoded::byte_serialize(scope.as_bytes()).collect();
            let href = |n: usize| format!("{base}/dashboard/graph?scope={scope_q}&page={n}");
            let body = html! {
                (picker)
                p class="muted" id="graph-summary" {
                    (p.total) " entities, " (relations.len()) " relations"
                    @if p.pages > 1 {
                        " — page " (p.page) " of " (p.pages) ", the most connected first"
                        @if p.elsewhere > 0 { "; " (p.elsewhere) " relations lead to entities on other pages" }
                    }
                }
                @if p.total == 0 {
                    p class="muted" id="graph-empty" {
                        "This graph is empty. An agent fills it with the graph tools (" code { "create_entities" } ", "
                        code { "create_relations" } ") on a key holding the graph toolset; see "
                        code { "continuity setup" } "."
                    }
                } @else {
                    (legend(&layout))
                    (graph_svg(&layout))
                    @if p.pages > 1 {
                        nav class="pager" aria-label="graph pages" {
                            @if p.page > 1 { a id="previous-page" href=(href(p.page - 1)) { "← Previous" } " " }
                            @if p.page < p.pages { a id="next-page" href=(href(p.page + 1)) { "Next →" } }
                        }
                    }
                }
            };
            shell(&base, &caller, &csrf, "Knowledge graph", "Graph", html! {}, body)
        }
        Err(e) => refused(&base, &caller, &csrf, "Knowledge graph", "Graph", &e),
    }
}

/// One page of a graph's entities.
struct Paged {
    entities: Vec<(String, String)>,
    total: usize,
    page: usize,
    pages: usize,
    /// Relations with one end on this page and the other on another.
    elsewhere: usize,
}

/// The entities of page `page` (1-based, clamped), most connected first, then by name.
fn paged(entities: &[(String, String)], relations: &[(String, String, String)], page: Option<usize>) -> Paged {
    let mut degree: BTreeMap<&str, usize> = entities.iter().map(|(n, _)| (n.as_str(), 0)).collect();
    for (f, _, t) in relations {
        for n in [f, t] {
            if let Some(d) = degree.get_mut(n.as_str()) {
                *d += 1;
            }
        }
    }
    let mut order: Vec<&(String, String)> = entities.iter().collect();
    order.sort_by(|a, b| degree[b.0.as_str()].cmp(&degree[a.0.as_str()]).then(a.0.cmp(&b.0)));
    let pages = entities.len().div_ceil(PAGE_SIZE).max(1);
    let page = page.unwrap_or(1).clamp(1, pages);
    let entities: Vec<(String, String)> = order.into_iter().skip((page - 1) * PAGE_SIZE).take(PAGE_SIZE).cloned().collect();
    let here: std::collections::BTreeSet<&str> = entities.iter().map(|(n, _)| n.as_str()).collect();
    let elsewhere = relations.iter().filter(|(f, _, t)| here.contains(f.as_str()) != here.contains(t.as_str())).count();
    Paged { total: degree.len(), page, pages, elsewhere, entities }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: usize) -> Vec<(String, String)> {
        (0..n).map(|i| (format!("Entity number {i} with a long name"), ["person", "company", "deal"][i % 3].to_owned())).collect()
    }

    #[test]
    fn the_graph_is_drawn_escaped() {
        let e = vec![("<script>".to_owned(), "x\"y".to_owned()), ("b".to_owned(), "t".to_owned())];
        let svg = graph_svg(&lay_out(&e, &[("<script>".into(), "knows".into(), "b".into())])).into_string();
        assert!(!svg.contains("<script>") && svg.contains("&lt;script&gt;"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 2);
        assert_eq!(svg.matches("<line").count(), 1);
    }

    #[test]
    fn no_two_nodes_share_a_cell_and_labels_fit_theirs() {
        for n in [1, 2, 6, 17, PAGE_SIZE] {
            let e = named(n);
            // A hub with spokes and a chain: the forces want them on top of each other.
            let mut r: Vec<(String, String, String)> = (1..n).map(|i| (e[0].0.clone(), "knows".into(), e[i].0.clone())).collect();
            r.extend((1..n.saturating_sub(1)).map(|i| (e[i].0.clone(), "next".into(), e[i + 1].0.clone())));
            let l = lay_out(&e, &r);
            assert_eq!(l.nodes.len(), n);
            for (i, a) in l.nodes.iter().enumerate() {
                assert!(a.x > 0.0 && a.y > 0.0 && a.x + CELL_W - 8.0 <= l.width - MARGIN + 0.1 && a.y < l.height, "{n}: {a:?}");
                for b in &l.nodes[i + 1..] {
                    // Different rows, or far enough apart on one row for a whole label.
                    assert!((a.y - b.y).abs() >= CELL_H - 0.1 || (a.x - b.x).abs() >= CELL_W - 0.1, "{n}: {a:?} {b:?}");
                }
            }
            assert!(l.nodes.iter().all(|p| label(&p.name).chars().count() <= LABEL_CHARS));
            assert!(l.width <= 2.0 * MARGIN + 6.0 * CELL_W);
        }
    }

    #[test]
    fn connected_nodes_end_up_nearer_than_strangers() {
        // Two cliques of five, joined by nothing: each clique's members are closer to
        // one another than to the other clique's, on average.
        let e = named(10);
        let mut r = Vec::new();
        for g in [0, 5] {
            for i in g..g + 5 {
                for j in (i + 1)..g + 5 {
                    r.push((e[i].0.clone(), "knows".to_owned(), e[j].0.clone()));
                }
            }
        }
        let l = lay_out(&e, &r);
        let d = |a: &Placed, b: &Placed| ((a.x - b.x) / CELL_W).hypot((a.y - b.y) / CELL_H);
        let (mut inside, mut across) = (Vec::new(), Vec::new());
        for i in 0..10 {
            for j in (i + 1)..10 {
                if (i < 5) == (j < 5) {
                    inside.push(d(&l.nodes[i], &l.nodes[j]))
                } else {
                    across.push(d(&l.nodes[i], &l.nodes[j]))
                }
            }
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!(mean(&inside) < mean(&across), "inside {} across {}", mean(&inside), mean(&across));
        assert_eq!(lay_out(&e, &r), l, "the layout is deterministic");
    }

    #[test]
    fn pages_hold_the_most_connected_first() {
        let e = named(PAGE_SIZE + 5);
        let r = vec![(e[44].0.clone(), "knows".to_owned(), e[3].0.clone())];
        let first = paged(&e, &r, None);
        assert_eq!((first.page, first.pages, first.total, first.entities.len()), (1, 2, PAGE_SIZE + 5, PAGE_SIZE));
        assert!(first.entities[..2].iter().all(|(n, _)| *n == e[44].0 || *n == e[3].0));
        let second = paged(&e, &r, Some(9));
        assert_eq!((second.page, second.entities.len(), second.elsewhere), (2, 5, 0));
        let legend = legend(&lay_out(&first.entities, &r)).into_string();
        assert!(legend.contains("person") && legend.contains("company") && legend.contains("deal"), "{legend}");
    }
}
