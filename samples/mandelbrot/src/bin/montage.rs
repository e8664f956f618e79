//! `montage`: a stand-in for ImageMagick's `montage -mode Concatenate`,
//! which lays images side by side on a grid.
//!
//! Usage: `montage IN... -mode Concatenate -tile COLSxROWS OUT`. The inputs
//! are binary PPMs (`P6`) of one size, placed row by row, left to right; OUT
//! is written as a PNG if its name ends in `.png`, else as a PPM. `-tile 1x1`
//! with one input converts it, as ImageMagick's `convert IN OUT` would.
//! Prints what it wrote on stdout.

use std::fs;
use std::process::ExitCode;

struct Image {
    w: usize,
    h: usize,
    rgb: Vec<u8>,
}

fn read_ppm(path: &str) -> Result<Image, String> {
    let bytes = fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    // The header: P6, width, height, maxval, each after whitespace and comments.
    let mut fields = Vec::new();
    let mut at = 0;
    while fields.len() < 4 {
        while at < bytes.len() && (bytes[at].is_ascii_whitespace() || bytes[at] == b'#') {
            if bytes[at] == b'#' {
                while at < bytes.len() && bytes[at] != b'\n' {
                    at += 1;
                }
            } else {
                at += 1;
            }
        }
        let start = at;
        while at < bytes.len() && !bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if start == at {
            return Err(format!("{path}: not a PPM"));
        }
        fields.push(String::from_utf8_lossy(&bytes[start..at]).into_owned());
    }
    let num = |s: &str| s.parse::<usize>().map_err(|_| format!("{path}: not a PPM"));
    let (w, h) = (num(&fields[1])?, num(&fields[2])?);
    if fields[0] != "P6" || num(&fields[3])? != 255 {
        return Err(format!("{path}: only 8-bit binary PPMs (P6) are read"));
    }
    let rgb = bytes.get(at + 1..at + 1 + w * h * 3).ok_or(format!("{path}: short"))?.to_vec();
    Ok(Image { w, h, rgb })
}

fn crc32(chunks: &[&[u8]]) -> u32 {
    let mut c = !0u32;
    for b in chunks.iter().flat_map(|s| s.iter()) {
        c ^= u32::from(*b);
        for _ in 0..8 {
            c = if c & 1 == 1 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

/// A PNG (8-bit RGB), its pixels in a zlib stream of stored (uncompressed)
/// deflate blocks.
fn png(img: &Image) -> Vec<u8> {
    let mut raw = Vec::with_capacity(img.h * (img.w * 3 + 1));
    for row in img.rgb.chunks(img.w * 3) {
        raw.push(0); // filter: none
        raw.extend_from_slice(row);
    }
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65535).collect();
    for (i, block) in blocks.iter().enumerate() {
        z.push(u8::from(i + 1 == blocks.len()));
        let n = block.len() as u16;
        z.extend_from_slice(&n.to_le_bytes());
        z.extend_from_slice(&(!n).to_le_bytes());
        z.extend_from_slice(block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for x in &raw {
        a = (a + u32::from(*x)) % 65521;
        b = (b + a) % 65521;
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&(img.w as u32).to_be_bytes());
    ihdr.extend_from_slice(&(img.h as u32).to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    for (kind, data) in [(b"IHDR", &ihdr), (b"IDAT", &z), (b"IEND", &Vec::new())] {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc32(&[kind, data]).to_be_bytes());
    }
    out
}

fn run(args: &[String]) -> Result<String, String> {
    let mut files = Vec::new();
    let mut tile = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-mode" => {
                it.next();
            }
            "-tile" => {
                let t = it.next().and_then(|t| t.split_once('x'));
                let t =
                    t.and_then(|(c, r)| Some((c.parse::<usize>().ok()?, r.parse::<usize>().ok()?)));
                tile = Some(t.ok_or("-tile takes COLSxROWS")?);
            }
            _ => files.push(a.clone()),
        }
    }
    let out = files.pop().ok_or("no output file")?;
    let images = files.iter().map(|f| read_ppm(f)).collect::<Result<Vec<_>, _>>()?;
    let first = images.first().ok_or("no input files")?;
    let (w, h) = (first.w, first.h);
    if images.iter().any(|i| (i.w, i.h) != (w, h)) {
        return Err("the images are not all one size".into());
    }
    let (cols, rows) = tile.unwrap_or((images.len(), 1));
    if cols * rows < images.len() {
        return Err(format!("{} images do not fit {cols}x{rows}", images.len()));
    }
    let mut all = Image { w: w * cols, h: h * rows, rgb: vec![0; w * cols * h * rows * 3] };
    for (k, img) in images.iter().enumerate() {
        let (x0, y0) = ((k % cols) * w, (k / cols) * h);
        for y in 0..h {
            let to = ((y0 + y) * all.w + x0) * 3;
            all.rgb[to..to + w * 3].copy_from_slice(&img.rgb[y * w * 3..(y + 1) * w * 3]);
        }
    }
    let bytes = if out.ends_with(".png") {
        png(&all)
    } else {
        let mut b = format!("P6\n{} {}\n255\n", all.w, all.h).into_bytes();
        b.extend_from_slice(&all.rgb);
        b
    };
    fs::write(&out, bytes).map_err(|e| format!("{out}: {e}"))?;
    Ok(format!(
        "montage: {} images, {cols}x{rows}, {}x{} pixels: wrote {out}",
        images.len(),
        all.w,
        all.h
    ))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(said) => {
            println!("{said}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("montage: {e}");
            eprintln!("usage: montage IN... -mode Concatenate -tile COLSxROWS OUT");
            ExitCode::from(2)
        }
    }
}
