//! Check-digit algorithms and small decoders, written out so that a number is reported only
//! when it could really be what it looks like.
//!
//! Every function works on ASCII digits already extracted by a detector (`&[u8]` of values
//! 0–9) and never panics: a wrong length simply fails the check.

/// Luhn (mod 10): payment cards, Canadian SIN.
pub(crate) fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 { if d * 2 > 9 { d * 2 - 9 } else { d * 2 } } else { d }
        })
        .sum();
    !digits.is_empty() && sum.is_multiple_of(10)
}

/// ISO 7064 mod 97-10 over an IBAN: moves the first four characters to the end, turns
/// letters into 10–35 and checks that the number is 1 modulo 97.
pub(crate) fn iban_valid(iban: &str) -> bool {
    let b = iban.as_bytes();
    if b.len() < 5 {
        return false;
    }
    let mut rem: u32 = 0;
    for &c in b[4..].iter().chain(&b[..4]) {
        let v = match c {
            b'0'..=b'9' => u32::from(c - b'0'),
            b'A'..=b'Z' => u32::from(c - b'A') + 10,
            _ => return false,
        };
        rem = if v >= 10 { (rem * 100 + v) % 97 } else { (rem * 10 + v) % 97 };
    }
    rem == 1
}

const VERHOEFF_D: [[u8; 10]; 10] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    [1, 2, 3, 4, 0, 6, 7, 8, 9, 5],
    [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
    [3, 4, 0, 1, 2, 8, 9, 5, 6, 7],
    [4, 0, 1, 2, 3, 9, 5, 6, 7, 8],
    [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
    [6, 5, 9, 8, 7, 1, 0, 4, 3, 2],
    [7, 6, 5, 9, 8, 2, 1, 0, 4, 3],
    [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
];

const VERHOEFF_P: [[u8; 10]; 8] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    [1, 5, 7, 6, 2, 8, 3, 0, 9, 4],
    [5, 8, 0, 3, 7, 9, 6, 1, 4, 2],
    [8, 9, 1, 6, 0, 4, 3, 5, 2, 7],
    [9, 4, 5, 3, 1, 2, 6, 8, 7, 0],
    [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
    [2, 7, 9, 3, 8, 0, 6, 4, 1, 5],
    [7, 0, 4, 6, 9, 1, 3, 2, 5, 8],
];

/// Verhoeff (dihedral group D5) check over a number whose last digit is the check digit:
/// Indian Aadhaar.
pub(crate) fn verhoeff(digits: &[u8]) -> bool {
    let mut c = 0u8;
    for (i, &d) in digits.iter().rev().enumerate() {
        let Some(p) = VERHOEFF_P[i % 8].get(usize::from(d)) else { return false };
        c = VERHOEFF_D[usize::from(c)][usize::from(*p)];
    }
    !digits.is_empty() && c == 0
}

/// The Dutch "11-proof" of a 9-digit BSN: 9·d1 + 8·d2 + … + 2·d8 − d9 is a non-zero multiple of 11.
pub(crate) fn eleven_proof(digits: &[u8]) -> bool {
    if digits.len() != 9 {
        return false;
    }
    let sum: i32 = digits.iter().zip([9, 8, 7, 6, 5, 4, 3, 2, -1]).map(|(&d, w)| i32::from(d) * w).sum();
    sum != 0 && sum % 11 == 0
}

/// The key of a French NIR: the last two of 15 digits equal 97 − (first 13 mod 97).
pub(crate) fn nir_key_ok(digits: &[u8]) -> bool {
    if digits.len() != 15 {
        return false;
    }
    let n = digits[..13].iter().fold(0u64, |acc, &d| acc * 10 + u64::from(d));
    let key = u64::from(digits[13]) * 10 + u64::from(digits[14]);
    97 - n % 97 == key
}

/// The German tax id (Steuer-IdNr): 11 digits, no leading zero, in the first ten one digit
/// appears two or three times and no digit more, and the last is an ISO 7064 MOD 11,10 check digit.
pub(crate) fn de_tax_id_ok(digits: &[u8]) -> bool {
    if digits.len() != 11 || digits[0] == 0 {
        return false;
    }
    let mut counts = [0u8; 10];
    for &d in &digits[..10] {
        if let Some(c) = counts.get_mut(usize::from(d)) {
            *c += 1;
        }
    }
    let repeated = counts.iter().filter(|&&c| c >= 2).count();
    if repeated != 1 || counts.iter().any(|&c| c > 3) {
        return false;
    }
    let mut product = 10u32;
    for &d in &digits[..10] {
        let mut sum = (u32::from(d) + product) % 10;
        if sum == 0 {
            sum = 10;
        }
        product = (sum * 2) % 11;
    }
    let check = (11 - product) % 10;
    check == u32::from(digits[10])
}

/// The check letter of a Spanish DNI number (NIE numbers first map X, Y, Z to 0, 1, 2).
pub(crate) fn dni_letter(number: u32) -> u8 {
    const LETTERS: &[u8; 23] = b"TRWAGMYFPDXBNJZSQVHLCKE";
    LETTERS[(number % 23) as usize]
}

/// The check character (16th) of an Italian codice fiscale: odd positions (1st, 3rd…) and
/// even positions have their own value tables; the sum modulo 26 is the letter.
pub(crate) fn codice_fiscale_ok(code: &str) -> bool {
    const ODD: [u32; 26] = [1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24, 23];
    let b = code.as_bytes();
    if b.len() != 16 {
        return false;
    }
    let mut sum = 0;
    for (i, &c) in b[..15].iter().enumerate() {
        let idx = match c {
            b'0'..=b'9' => usize::from(c - b'0'),
            b'A'..=b'Z' => usize::from(c - b'A'),
            _ => return false,
        };
        sum += if i % 2 == 0 { ODD[idx] } else { idx as u32 };
    }
    u32::from(b[15]) == u32::from(b'A') + sum % 26
}

/// Shannon entropy in bits per character.
pub(crate) fn shannon(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for &b in s.as_bytes() {
        counts[usize::from(b)] += 1;
    }
    let n = f64::from(u32::try_from(s.len()).unwrap_or(u32::MAX));
    counts.iter().filter(|&&c| c > 0).map(|&c| f64::from(c) / n).map(|p| -p * p.log2()).sum()
}

/// Decodes base64 (`url`: the URL-safe alphabet with `-` and `_`), padding optional.
/// `None` for a character outside the alphabet or an impossible length.
pub(crate) fn base64_decode(s: &str, url: bool) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' if !url => 62,
            b'/' if !url => 63,
            b'-' if url => 62,
            b'_' if url => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    (s.len() % 4 != 1).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digits(s: &str) -> Vec<u8> {
        s.bytes().filter(u8::is_ascii_digit).map(|b| b - b'0').collect()
    }

    #[test]
    fn luhn_known_values() {
        assert!(luhn(&digits("4111 1111 1111 1111")));
        assert!(luhn(&digits("378282246310005")));
        assert!(luhn(&digits("046 454 286")));
        assert!(!luhn(&digits("4111 1111 1111 1112")));
        assert!(!luhn(&[]));
    }

    #[test]
    fn iban_mod97() {
        assert!(iban_valid("DE89370400440532013000"));
        assert!(iban_valid("GB82WEST12345698765432"));
        assert!(!iban_valid("DE88370400440532013000"));
        assert!(!iban_valid("DE89-370400"));
        assert!(!iban_valid("DE8"));
    }

    #[test]
    fn verhoeff_known_values() {
        assert!(verhoeff(&digits("2363")));
        assert!(verhoeff(&digits("1428570")));
        assert!(!verhoeff(&digits("2364")));
        assert!(!verhoeff(&[]));
    }

    #[test]
    fn eleven_proof_known_values() {
        assert!(eleven_proof(&digits("111222333")));
        assert!(eleven_proof(&digits("123456782")));
        assert!(!eleven_proof(&digits("123456789")));
        assert!(!eleven_proof(&digits("000000000")));
    }

    #[test]
    fn nir_and_de_tax_id() {
        assert!(nir_key_ok(&digits("1 84 12 76 451 089 46")));
        assert!(!nir_key_ok(&digits("1 84 12 76 451 089 47")));
        assert!(de_tax_id_ok(&digits("86095742719")));
        assert!(!de_tax_id_ok(&digits("86095742718")));
        assert!(!de_tax_id_ok(&digits("12345678901")), "no repeated digit");
    }

    #[test]
    fn national_letters() {
        assert_eq!(dni_letter(12_345_678), b'Z');
        assert!(codice_fiscale_ok("RSSMRA85T10A562S"));
        assert!(!codice_fiscale_ok("RSSMRA85T10A562T"));
    }

    #[test]
    fn entropy() {
        assert!(shannon("aaaaaaaa").abs() < 1e-9);
        assert!((shannon("abcd") - 2.0).abs() < 1e-9);
        assert!(shannon("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY") > 4.0);
        assert!(shannon("") == 0.0);
    }

    #[test]
    fn base64() {
        assert_eq!(base64_decode("eyJhbGciOiJIUzI1NiJ9", true).unwrap_or_default(), br#"{"alg":"HS256"}"#);
        assert_eq!(base64_decode("dXNlcjpwYXNz", false).unwrap_or_default(), b"user:pass");
        assert_eq!(base64_decode("YQ==", false).unwrap_or_default(), b"a");
        assert!(base64_decode("a-b_", false).is_none());
        assert!(base64_decode("abcde", true).is_none());
    }
}
