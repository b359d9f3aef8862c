//! The floor of `benches/http_entity_get.sh`: a bare axum server on the same runtime,
//! allocator and HTTP stack as `continuity serve`, answering every `POST /mcp` with the
//! bytes of the response `continuity serve` gave to the benchmark's request — no
//! authentication, no MCP, no storage. What `serve` does beyond this is the cost of its
//! guarantees; the script prints both.
//!
//!   http_floor ADDR BODY_FILE     # serves until killed; prints `listening ADDR` once bound

use axum::Router;
use axum::http::header;
use axum::routing::post;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(body_file)) = (args.next(), args.next()) else {
        eprintln!("usage: http_floor ADDR BODY_FILE (the response body to answer with)");
        return std::process::ExitCode::from(2);
    };
    let body = match std::fs::read(&body_file) {
        Ok(b) => bytes::Bytes::from(b),
        Err(e) => {
            eprintln!("reading {body_file}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let app = Router::new().route(
        "/mcp",
        post(move |_body: bytes::Bytes| {
            let body = body.clone();
            async move { ([(header::CONTENT_TYPE, "application/json")], body) }
        }),
    );
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("binding {addr}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    println!("listening {addr}");
    match axum::serve(listener, app).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}
