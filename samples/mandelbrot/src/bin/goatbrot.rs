//! `goatbrot`: a stand-in for goatbrot (github.com/beejjorgensen/goatbrot),
//! which draws part of the Mandelbrot set as a PPM image.
//!
//! Usage: `goatbrot -i ITERATIONS -c X,Y -w WIDTH -s PX_W,PX_H -o OUT.ppm`,
//! goatbrot's options: the iteration cap, the centre of the region, its width
//! in the complex plane, the image's size in pixels, the file to write (a
//! binary PPM, `P6`). Pixel (i, j) samples the point at its centre, so tiles
//! drawn side by side make the image one call over the whole region draws.
//! Points of the set are black; the others are coloured by how fast they
//! escape. Prints what it drew on stdout.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::ExitCode;

struct Opts {
    iterations: u32,
    centre: (f64, f64),
    width: f64,
    size: (usize, usize),
    out: String,
}

fn pair<T: std::str::FromStr>(s: &str) -> Option<(T, T)> {
    let (a, b) = s.split_once(',')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

fn parse(args: &[String]) -> Option<Opts> {
    let mut o = Opts {
        iterations: 500,
        centre: (0.0, 0.0),
        width: 3.0,
        size: (640, 480),
        out: "goatbrot.ppm".into(),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next()?;
        match flag.as_str() {
            "-i" => o.iterations = value.parse().ok()?,
            "-c" => o.centre = pair(value)?,
            "-w" => o.width = value.parse().ok()?,
            "-s" => o.size = pair(value)?,
            "-o" => o.out = value.clone(),
            _ => return None,
        }
    }
    (o.size.0 > 0 && o.size.1 > 0 && o.width > 0.0).then_some(o)
}

/// How many iterations the point c takes to escape, or None if it stays.
fn escape(cr: f64, ci: f64, cap: u32) -> Option<u32> {
    // The main cardioid and the period-2 bulb are in the set: no need to iterate.
    let q = (cr - 0.25) * (cr - 0.25) + ci * ci;
    if q * (q + (cr - 0.25)) <= 0.25 * ci * ci || (cr + 1.0) * (cr + 1.0) + ci * ci <= 0.0625 {
        return None;
    }
    let (mut zr, mut zi) = (0.0f64, 0.0f64);
    for n in 0..cap {
        if zr * zr + zi * zi > 4.0 {
            return Some(n);
        }
        (zr, zi) = (zr * zr - zi * zi + cr, 2.0 * zr * zi + ci);
    }
    None
}

fn colour(n: Option<u32>) -> [u8; 3] {
    match n {
        None => [0, 0, 0],
        Some(n) => {
            let t = (n % 64) as u8;
            [t * 4, 255 - t * 2, 128u8.wrapping_add(t * 3)]
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(o) = parse(&args) else {
        eprintln!("usage: goatbrot -i ITERATIONS -c X,Y -w WIDTH -s PX_W,PX_H -o OUT.ppm");
        return ExitCode::from(2);
    };
    let (w, h) = o.size;
    let height = o.width * h as f64 / w as f64;
    let (left, top) = (o.centre.0 - o.width / 2.0, o.centre.1 + height / 2.0);
    let write = || -> std::io::Result<usize> {
        let mut out = BufWriter::new(File::create(&o.out)?);
        write!(out, "P6\n{w} {h}\n255\n")?;
        let mut inside = 0;
        for j in 0..h {
            let ci = top - (j as f64 + 0.5) * height / h as f64;
            for i in 0..w {
                let cr = left + (i as f64 + 0.5) * o.width / w as f64;
                let n = escape(cr, ci, o.iterations);
                inside += usize::from(n.is_none());
                out.write_all(&colour(n))?;
            }
        }
        out.flush()?;
        Ok(inside)
    };
    match write() {
        Ok(inside) => {
            println!(
                "goatbrot: {w}x{h} pixels around ({},{}), width {}, {} iterations: {inside} in the set; wrote {}",
                o.centre.0, o.centre.1, o.width, o.iterations, o.out
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("goatbrot: {}: {e}", o.out);
            ExitCode::from(1)
        }
    }
}
