//! The name interner keeps what it interns for the life of the process, and
//! names come from anyone's ads: what any number of ads can make it keep is
//! bounded (65,536 spellings of at most 256 bytes, 4 MiB of text in all),
//! and names past those bounds still compare and look up exactly. This test
//! fills the interner's bytes (so it runs in its own process).

use classad::{AttrName, Value, interned, parse_ad};

#[test]
fn no_stream_of_names_makes_the_interner_keep_more_than_its_budget() {
    let start = interned();
    // Long names (10 KiB each, 20 MiB in all) are never kept.
    for i in 0..2_000 {
        let long = format!("{}{i}", "L".repeat(10 << 10));
        let a = AttrName::new(&long);
        assert_eq!(a, AttrName::new(&long.to_lowercase()));
        assert_eq!(a.as_str(), long);
    }
    assert_eq!(interned().bytes, start.bytes, "a long name was kept");

    // An ad with a long name works as any other.
    let long = "VeryLong".repeat(64);
    let ad = parse_ad(&format!("[{long} = 5; Short = {} + 1]", long.to_uppercase())).unwrap();
    assert_eq!(ad.get(&long.to_lowercase()).and_then(|e| e.as_literal()), Some(&Value::Int(5)));
    assert_eq!(ad.eval_attr("short"), Value::Int(6));

    // Short names: kept only up to the byte budget (40,000 x 200 bytes
    // would be 8 MB).
    let early = AttrName::new("EarlyName");
    for i in 0..40_000 {
        let name = format!("{:0>200}", i);
        let _ = AttrName::new(&format!("N{name}"));
    }
    let full = interned();
    assert!(full.bytes <= 4 << 20, "{full:?}");
    assert!(full.bytes > (4 << 20) - 256, "the budget was reached: {full:?}");

    // Past the budget, new names still compare exactly and case-insensitively,
    // and names kept before keep working.
    let late = format!("N{:0>200}", 39_999);
    assert_eq!(AttrName::new(&late), AttrName::new(&late.to_lowercase()));
    assert_ne!(AttrName::new(&late), AttrName::new(&format!("N{:0>200}", 39_998)));
    assert_eq!(early, AttrName::new("EARLYNAME"));
    let ad = parse_ad(&format!(
        "[{late} = 1; EarlyName = 2; BrandNew = {} + EARLYNAME]",
        late.to_lowercase()
    ))
    .unwrap();
    assert_eq!(ad.eval_attr("brandnew"), Value::Int(3));
    assert!(interned().bytes <= 4 << 20);
}
