//! Parses arbitrary text as an expression, one ad and a sequence of ads;
//! whatever parses must unparse to text that parses back to an equal value.

use classad::{ClassAd, Expr};

fn check_expr(e: &Expr) {
    let text = e.to_string();
    let back = classad::parse_expr(&text)
        .unwrap_or_else(|err| panic!("unparse of {e:?} does not parse: {text:?}: {err}"));
    assert_eq!(&back, e, "unparse round trip through {text:?}");
}

fn check_ad(ad: &ClassAd) {
    for (_, e) in ad.iter() {
        check_expr(e);
    }
    let text = ad.to_string();
    let back = classad::parse_ad(&text)
        .unwrap_or_else(|err| panic!("unparse of ad does not parse: {text:?}: {err}"));
    assert_eq!(&back, ad, "ad unparse round trip through {text:?}");
}

/// Runs one input through the target's checks; panics on a failure.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(e) = classad::parse_expr(text) {
        check_expr(&e);
    }
    if let Ok(ad) = classad::parse_ad(text) {
        check_ad(&ad);
    }
    if let Ok(ads) = classad::parser::parse_ads(text) {
        for ad in &ads {
            check_ad(ad);
        }
    }
}
