//! Reads arbitrary text as HTCondor's JSON form of a ClassAd
//! (`classad::json`: literals as JSON values, `null` for undefined, arrays
//! for lists, objects for nested ads, and any other expression as the string
//! `"\/Expr(<expression>)\/"`). Nothing may panic; an error names where it
//! is. What reads writes back, with `ad_to_json_string` and with serde, to
//! JSON that reads back to an equal ad, and reading through serde
//! (`Deserialize for ClassAd`) agrees with `ad_from_json_str`.
//!
//! Input: UTF-8 text. It is read as a whole ad, and also as one attribute's
//! value (`{"a": <text>}`), so that any JSON value reaches the value decoder.
//! If the text parses as a ClassAd in ClassAd syntax instead, that ad goes
//! through JSON and back too.

use classad::ClassAd;
use classad::json::{ad_from_json, ad_from_json_str, ad_to_json, ad_to_json_string};

fn round_trip(ad: &ClassAd) {
    let text = ad_to_json_string(ad);
    let back = ad_from_json_str(&text)
        .unwrap_or_else(|e| panic!("the JSON of an ad does not read back: {text:?}: {e}"));
    assert_eq!(&back, ad, "JSON round trip through {text:?}");
    let value = ad_to_json(ad);
    assert_eq!(ad_from_json(&value).as_ref(), Ok(ad), "JSON value round trip {value}");
    let serde_text = serde_json::to_string(ad).expect("an ad serialises");
    let back: ClassAd = serde_json::from_str(&serde_text)
        .unwrap_or_else(|e| panic!("serde JSON of an ad does not read back: {serde_text:?}: {e}"));
    assert_eq!(&back, ad, "serde round trip through {serde_text:?}");
    // A second trip writes the same text.
    assert_eq!(ad_to_json_string(&back), text);
}

fn read(text: &str) {
    let direct = ad_from_json_str(text);
    let serde: Result<ClassAd, _> = serde_json::from_str(text);
    assert_eq!(direct.is_ok(), serde.is_ok(), "{direct:?} / {serde:?}");
    match direct {
        Ok(ad) => {
            assert_eq!(serde.as_ref().ok(), Some(&ad));
            round_trip(&ad);
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
        }
    }
}

/// Runs one input through the target's checks; panics on a failure.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    read(text);
    read(&format!("{{\"a\": {text}}}"));
    if let Ok(ad) = classad::parse_ad(text) {
        round_trip(&ad);
    }
}
