//! Synthetic camera frames and robot trajectories, deterministic from a seed.
//!
//! A decoder pays for detail, so flat colours would make generated videos decode several times
//! faster than real footage. Frames here are a textured background (multi-octave value noise
//! with a wood-like grain) with a few textured objects moving over it along smooth paths, plus
//! mild per-frame sensor noise; their decode cost is close to real robot footage (see the
//! `video` bench, which compares it with the real G1 videos).
//!
//! The state of an episode follows the motion: its first two components are the first object's
//! position in [0, 1] (PushT's state is a 2-D position), the others smooth oscillations; the
//! action is the state one frame ahead (a position target).

use std::f64::consts::TAU;

/// SplitMix64: a small, fast, well-mixed generator.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// A generator for `seed` mixed with `stream` (an episode, a camera…), so that streams of
    /// one seed are unrelated.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut rng = SplitMix64(seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03));
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce5_e9b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
}

/// Amplitude ratio of successive octaves of value noise: the share of fine detail. Tuned so that
/// the G1 preset's AV1 files (GOP 2, crf 30) cost libdav1d about what the real G1 footage costs
/// per frame (0.6 gave about 0.75× the real cost, 0.8 about 1×).
const PERSISTENCE: f32 = 0.8;

/// Multi-octave value noise in [0, 1] of `width × height`, coarsest cell `coarsest` pixels,
/// finest 2 pixels.
fn fractal_noise(rng: &mut SplitMix64, width: usize, height: usize, coarsest: usize) -> Vec<f32> {
    let mut out = vec![0f32; width * height];
    let mut cell = coarsest.max(2);
    let mut amplitude = 1.0f32;
    let mut total = 0.0f32;
    while cell >= 2 {
        let (gw, gh) = (width / cell + 2, height / cell + 2);
        let grid: Vec<f32> = (0..gw * gh).map(|_| rng.unit() as f32).collect();
        let inv = 1.0 / cell as f32;
        for y in 0..height {
            let fy = y as f32 * inv;
            let (gy, ty) = (fy as usize, smooth(fy.fract()));
            for x in 0..width {
                let fx = x as f32 * inv;
                let (gx, tx) = (fx as usize, smooth(fx.fract()));
                let at = |i: usize, j: usize| grid[j * gw + i];
                let top = at(gx, gy) + (at(gx + 1, gy) - at(gx, gy)) * tx;
                let bottom = at(gx, gy + 1) + (at(gx + 1, gy + 1) - at(gx, gy + 1)) * tx;
                out[y * width + x] += amplitude * (top + (bottom - top) * ty);
            }
        }
        total += amplitude;
        amplitude *= PERSISTENCE;
        cell /= 2;
    }
    out.iter_mut().for_each(|v| *v /= total);
    out
}

fn smooth(t: f32) -> f32 {
    t * t * (3.0 - 2.0 * t)
}

/// A random saturated-ish colour, RGB in [0, 255].
fn colour(rng: &mut SplitMix64) -> [f32; 3] {
    let hue = rng.unit() * 6.0;
    let (sector, f) = (hue as usize, hue.fract() as f32);
    let (hi, lo) = (rng.range(170.0, 245.0) as f32, rng.range(30.0, 110.0) as f32);
    let mid_up = lo + (hi - lo) * f;
    let mid_down = hi - (hi - lo) * f;
    match sector {
        0 => [hi, mid_up, lo],
        1 => [mid_down, hi, lo],
        2 => [lo, hi, mid_up],
        3 => [lo, mid_down, hi],
        4 => [mid_up, lo, hi],
        _ => [hi, lo, mid_down],
    }
}

/// A textured RGB image of `width × height`: `base` colour shaded by value noise, with stripes
/// bent by the noise (grain) of random direction and frequency.
fn texture(rng: &mut SplitMix64, width: usize, height: usize, base: [f32; 3]) -> Vec<u8> {
    let coarsest = (width.max(height) / 4).clamp(4, 64).next_power_of_two();
    let noise = fractal_noise(rng, width, height, coarsest);
    let angle = rng.range(0.0, TAU) as f32;
    let (dx, dy) = (angle.cos(), angle.sin());
    let frequency = rng.range(0.08, 0.35) as f32;
    let bend = rng.range(4.0, 14.0) as f32;
    let grain = rng.range(0.10, 0.22) as f32;
    let mut out = vec![0u8; width * height * 3];
    for y in 0..height {
        for x in 0..width {
            let n = noise[y * width + x];
            let phase = (x as f32 * dx + y as f32 * dy) * frequency + n * bend;
            let shade = 0.55 + 0.75 * (n - 0.5) + grain * phase.sin();
            let px = &mut out[(y * width + x) * 3..][..3];
            for c in 0..3 {
                px[c] = (base[c] * shade).clamp(0.0, 255.0) as u8;
            }
        }
    }
    out
}

/// A smooth periodic path: `centre + amplitude · sin(2π f t + phase)` per axis, in [0, 1].
#[derive(Debug, Clone)]
struct Path {
    centre: [f64; 2],
    amplitude: [f64; 2],
    frequency: [f64; 2],
    phase: [f64; 2],
}

impl Path {
    fn random(rng: &mut SplitMix64, margin: f64) -> Self {
        let mut axis = || {
            let amplitude = rng.range(0.1, 0.5 - margin);
            let centre = rng.range(margin + amplitude, 1.0 - margin - amplitude);
            (centre, amplitude, rng.range(0.04, 0.25), rng.range(0.0, TAU))
        };
        let (x, y) = (axis(), axis());
        Path { centre: [x.0, y.0], amplitude: [x.1, y.1], frequency: [x.2, y.2], phase: [x.3, y.3] }
    }

    fn at(&self, t: f64) -> [f64; 2] {
        [0, 1].map(|a| {
            self.centre[a] + self.amplitude[a] * (TAU * self.frequency[a] * t + self.phase[a]).sin()
        })
    }
}

/// One moving object of an episode, its size relative to the frame's smaller side.
#[derive(Debug, Clone)]
struct Object {
    path: Path,
    radius: f64,
    round: bool,
    colour: [f32; 3],
    texture_seed: u64,
}

/// The motion of one episode: objects on their paths, shared by every camera.
#[derive(Debug, Clone)]
pub struct Motion {
    objects: Vec<Object>,
    /// Per state component beyond the first two: (amplitude, frequency, phase) pairs.
    oscillations: Vec<[(f64, f64, f64); 2]>,
}

impl Motion {
    /// The motion of episode `episode` of a dataset generated with `seed`, for `dims`
    /// components of state.
    pub fn new(seed: u64, episode: usize, dims: usize) -> Self {
        let mut rng = SplitMix64::new(seed, 0x6d6f_7469_6f6e ^ episode as u64);
        let count = 3 + (rng.next_u64() % 3) as usize;
        let objects = (0..count)
            .map(|_| {
                let radius = rng.range(0.08, 0.2);
                Object {
                    path: Path::random(&mut rng, radius * 0.5),
                    radius,
                    round: rng.unit() < 0.5,
                    colour: colour(&mut rng),
                    texture_seed: rng.next_u64(),
                }
            })
            .collect();
        let mut wave = || (rng.range(0.1, 0.6), rng.range(0.05, 0.5), rng.range(0.0, TAU));
        let oscillations = (0..dims.saturating_sub(2)).map(|_| [wave(), wave()]).collect();
        Motion { objects, oscillations }
    }

    /// Components of the state it gives (at least 2).
    pub fn dims(&self) -> usize {
        2 + self.oscillations.len()
    }

    /// The state at time `t` (seconds): the first object's position, then oscillations.
    pub fn state(&self, t: f64, out: &mut [f32]) {
        let position = self.objects[0].path.at(t);
        for (d, value) in out.iter_mut().enumerate() {
            *value = match d {
                0 | 1 => position[d] as f32,
                _ => self.oscillations[d - 2]
                    .iter()
                    .map(|&(a, f, p)| a * (TAU * f * t + p).sin())
                    .sum::<f64>() as f32,
            };
        }
    }
}

/// The per-frame sensor noise amplitude (± levels of 255).
const NOISE: i32 = 3;

/// One camera's view: a fixed textured background of `width × height` and the episode's
/// objects rendered at this size.
pub struct Camera {
    width: usize,
    height: usize,
    background: Vec<u8>,
    seed: u64,
}

/// An object's texture and mask at one camera's size.
struct Sprite {
    size: usize,
    /// RGB, `size × size`.
    pixels: Vec<u8>,
    /// Per pixel: inside the object.
    mask: Vec<bool>,
}

/// A camera's sprites for one episode's objects.
pub struct EpisodeView<'a> {
    camera: &'a Camera,
    motion: &'a Motion,
    sprites: Vec<Sprite>,
    noise: u64,
}

impl Camera {
    /// Camera number `index` of a dataset generated with `seed`: its background.
    pub fn new(seed: u64, index: usize, height: u32, width: u32) -> Self {
        let (width, height) = (width as usize, height as usize);
        let mut rng = SplitMix64::new(seed, 0x6361_6d65_7261 ^ index as u64);
        let base = [
            rng.range(150.0, 220.0) as f32,
            rng.range(110.0, 170.0) as f32,
            rng.range(70.0, 130.0) as f32,
        ];
        let background = texture(&mut rng, width, height, base);
        Camera { width, height, background, seed: rng.next_u64() }
    }

    /// This camera's view of an episode's `motion`.
    pub fn view<'a>(&'a self, motion: &'a Motion, episode: usize) -> EpisodeView<'a> {
        let side = self.width.min(self.height) as f64;
        let sprites = motion
            .objects
            .iter()
            .map(|object| {
                let size = ((2.0 * object.radius * side) as usize).max(2);
                let mut rng = SplitMix64::new(object.texture_seed, self.seed);
                let pixels = texture(&mut rng, size, size, object.colour);
                let r = size as f64 / 2.0;
                let corner = r * 0.35;
                let mask = (0..size * size)
                    .map(|i| {
                        let (x, y) = ((i % size) as f64 + 0.5 - r, (i / size) as f64 + 0.5 - r);
                        if object.round {
                            x * x + y * y <= r * r
                        } else {
                            let (qx, qy) = (x.abs() - (r - corner), y.abs() - (r - corner));
                            qx.max(0.0).hypot(qy.max(0.0)) <= corner
                        }
                    })
                    .collect();
                Sprite { size, pixels, mask }
            })
            .collect();
        EpisodeView { camera: self, motion, sprites, noise: self.seed ^ ((episode as u64) << 32) }
    }
}

impl EpisodeView<'_> {
    /// Renders the frame at time `t` (seconds; frame `frame` of the episode) into `out`:
    /// packed RGB24, `height × width × 3`.
    pub fn render(&self, t: f64, frame: usize, out: &mut [u8]) {
        let camera = self.camera;
        let (width, height) = (camera.width, camera.height);
        out.copy_from_slice(&camera.background);
        for (object, sprite) in self.motion.objects.iter().zip(&self.sprites) {
            let [cx, cy] = object.path.at(t);
            let x0 = (cx * width as f64) as isize - sprite.size as isize / 2;
            let y0 = (cy * height as f64) as isize - sprite.size as isize / 2;
            for sy in 0..sprite.size {
                let y = y0 + sy as isize;
                if y < 0 || y >= height as isize {
                    continue;
                }
                let row = &mut out[y as usize * width * 3..][..width * 3];
                for sx in 0..sprite.size {
                    let x = x0 + sx as isize;
                    let i = sy * sprite.size + sx;
                    if x < 0 || x >= width as isize || !sprite.mask[i] {
                        continue;
                    }
                    row[x as usize * 3..][..3].copy_from_slice(&sprite.pixels[i * 3..][..3]);
                }
            }
        }
        // Sensor noise: xorshift over the pixels, a fresh stream per frame.
        let mut state = (self.noise ^ (frame as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
        let span = (2 * NOISE + 1) as u64;
        for value in out.iter_mut() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let delta = ((state >> 40) % span) as i32 - NOISE;
            *value = (i32::from(*value) + delta).clamp(0, 255) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_deterministic_textured_and_moving() {
        let camera = Camera::new(7, 0, 48, 64);
        let motion = Motion::new(7, 0, 4);
        let view = camera.view(&motion, 0);
        let mut a = vec![0u8; 48 * 64 * 3];
        let mut b = a.clone();
        view.render(0.0, 0, &mut a);
        Camera::new(7, 0, 48, 64).view(&Motion::new(7, 0, 4), 0).render(0.0, 0, &mut b);
        assert_eq!(a, b, "same seed, same frame");
        let distinct: std::collections::HashSet<u8> = a.iter().copied().collect();
        assert!(distinct.len() > 60, "textured: {} distinct values", distinct.len());
        view.render(2.0, 20, &mut b);
        let changed = a.iter().zip(&b).filter(|(x, y)| x.abs_diff(**y) > 2 * NOISE as u8).count();
        assert!(changed > a.len() / 20, "objects move: {changed} values changed");
    }

    #[test]
    fn state_follows_the_first_object_and_is_smooth() {
        let motion = Motion::new(1, 3, 5);
        let (mut s0, mut s1) = ([0f32; 5], [0f32; 5]);
        motion.state(1.0, &mut s0);
        motion.state(1.0 + 1.0 / 30.0, &mut s1);
        let position = motion.objects[0].path.at(1.0);
        assert_eq!([s0[0], s0[1]], [position[0] as f32, position[1] as f32]);
        assert!(s0.iter().zip(&s1).all(|(a, b)| (a - b).abs() < 0.2), "{s0:?} {s1:?}");
        assert!((0.0..=1.0).contains(&s0[0]) && (0.0..=1.0).contains(&s0[1]));
    }
}
