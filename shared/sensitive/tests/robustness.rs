//! Never panic, stay fast: random bytes, adversarial repetitions, and the scan time of an
//! ordinary 16 KiB text (printed, never asserted: timing depends on the machine).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

/// A tiny xorshift generator, so the test needs no dependency and is reproducible.
fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

/// Findings are sorted, disjoint, non-empty and on char boundaries.
fn check_invariants(text: &str) {
    let found = sensitive::scan(text);
    let mut last_end = 0;
    for f in &found {
        assert!(f.start < f.end && f.start >= last_end, "{f:?}");
        assert!(text.is_char_boundary(f.start) && text.is_char_boundary(f.end), "{f:?}");
        last_end = f.end;
    }
    let redacted = sensitive::redact(text, &found, |_, _| "[x]".into());
    assert!(redacted.len() <= text.len() + 3 * found.len());
}

#[test]
fn random_bytes_as_text_never_panic() {
    for seed in 1..=8u64 {
        let bytes = random_bytes(64 * 1024, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        check_invariants(&String::from_utf8_lossy(&bytes));
        // Printable ASCII only: far more token-like runs.
        let ascii: String = bytes.iter().map(|b| char::from(b' ' + b % 95)).collect();
        check_invariants(&ascii);
        // Digits, separators and letters: exercises the number runs.
        let digits: String = bytes.iter().map(|b| char::from(b"0123456789 -./ABZ@:=\n"[usize::from(*b) % 21])).collect();
        check_invariants(&digits);
    }
}

#[test]
fn adversarial_repetitions_never_panic() {
    let pieces = [
        "-----BEGIN PRIVATE KEY-----",
        "4 ",
        "4111-",
        "a@b.",
        "password=",
        "password is ",
        "eyJhbGciOiJIUzI1NiJ9.",
        "postgres://a:b@",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAAS",
        "PuTTY-User-Key-File-2: x\nPrivate-Lines: 99999999999999999999\n",
        "é€😀\u{0}\u{7f}\r\n",
        "AKIA",
        "DE89 ",
        "token ",
        "Authorization: Basic ",
    ];
    for piece in pieces {
        let text = piece.repeat(64 * 1024 / piece.len());
        let started = Instant::now();
        check_invariants(&text);
        println!("{:>8.2} ms  {piece:?} x {}", started.elapsed().as_secs_f64() * 1e3, text.len() / piece.len());
    }
}

#[test]
fn prints_the_time_to_scan_sixteen_kib_of_prose() {
    let sentences = [
        "Renewals are due 30 days before 2026-12-01 and the account manager owns the follow-up. ",
        "Deal D-1042 moved to closed-won at $48,000 after the security review on 2024-03-02. ",
        "The customer asked whether their key contacts can access the shared dashboard. ",
        "Invoice INV-2024-00017 was paid; the token budget for summaries stays at 4096. ",
        "We rotate passwords quarterly and keep secrets in the vault, never in tickets. ",
        "Support escalations above P2 page the on-call engineer through the private channel. ",
    ];
    let mut text = String::new();
    while text.len() < 16 * 1024 {
        for s in sentences {
            text.push_str(s);
        }
    }
    text.truncate(16 * 1024);
    assert!(sensitive::scan(&text).is_empty(), "{:?}", sensitive::scan(&text));
    let runs = 50;
    let started = Instant::now();
    for _ in 0..runs {
        std::hint::black_box(sensitive::scan(std::hint::black_box(&text)));
    }
    let per_scan = started.elapsed().as_secs_f64() * 1e3 / f64::from(runs);
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    println!("scan of {} bytes of prose: {per_scan:.3} ms ({profile})", text.len());
}
