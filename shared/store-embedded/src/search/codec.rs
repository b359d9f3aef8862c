//! The little-endian encoding of a saved partition ([`super::saved`]): numbers, byte
//! strings and arrays, read back with every length checked against what is left of the
//! file, so a damaged file is an error and never a panic or a huge allocation.

use std::io::{BufReader, BufWriter, Read, Write};

pub(super) struct Writer<W: Write>(pub BufWriter<W>);

impl<W: Write> Writer<W> {
    pub fn u8(&mut self, v: u8) -> std::io::Result<()> {
        self.0.write_all(&[v])
    }
    pub fn u32(&mut self, v: u32) -> std::io::Result<()> {
        self.0.write_all(&v.to_le_bytes())
    }
    pub fn u64(&mut self, v: u64) -> std::io::Result<()> {
        self.0.write_all(&v.to_le_bytes())
    }
    pub fn i64(&mut self, v: i64) -> std::io::Result<()> {
        self.0.write_all(&v.to_le_bytes())
    }
    /// A length as a `u32` (every count in a partition fits: slots are `u32`).
    pub fn len(&mut self, n: usize) -> std::io::Result<()> {
        let n = u32::try_from(n).map_err(|_| std::io::Error::other("a partition too large to save"))?;
        self.u32(n)
    }
    pub fn str(&mut self, s: &str) -> std::io::Result<()> {
        self.len(s.len())?;
        self.0.write_all(s.as_bytes())
    }
    pub fn u32s(&mut self, v: &[u32]) -> std::io::Result<()> {
        self.len(v.len())?;
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.0.write_all(&bytes)
    }
}

/// Why a saved partition could not be read (it is then rebuilt from the table).
pub(super) type Bad = String;

pub(super) struct Reader<R: Read> {
    inner: BufReader<R>,
    left: u64,
}

impl<R: Read> Reader<R> {
    pub fn new(inner: R, size: u64) -> Self {
        Self { inner: BufReader::with_capacity(1 << 20, inner), left: size }
    }

    pub fn bytes(&mut self, n: usize) -> Result<Vec<u8>, Bad> {
        if n as u64 > self.left {
            return Err(format!("a length of {n} bytes runs past the end of the file"));
        }
        let mut b = vec![0; n];
        self.inner.read_exact(&mut b).map_err(|e| format!("reading: {e}"))?;
        self.left -= n as u64;
        Ok(b)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Bad> {
        let b = self.bytes(N)?;
        let mut a = [0; N];
        a.copy_from_slice(&b);
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8, Bad> {
        Ok(self.array::<1>()?[0])
    }
    pub fn u32(&mut self) -> Result<u32, Bad> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64, Bad> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn i64(&mut self) -> Result<i64, Bad> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    pub fn len(&mut self) -> Result<usize, Bad> {
        usize::try_from(self.u32()?).map_err(|_| "a length beyond this machine's addresses".to_owned())
    }
    pub fn str(&mut self) -> Result<String, Bad> {
        let n = self.len()?;
        String::from_utf8(self.bytes(n)?).map_err(|_| "a string that is not UTF-8".to_owned())
    }
    pub fn u32s(&mut self) -> Result<Vec<u32>, Bad> {
        let n = self.len()?;
        let b = self.bytes(n.checked_mul(4).ok_or("a length that overflows")?)?;
        Ok(b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
    /// Whether every byte was read.
    pub fn at_end(&self) -> bool {
        self.left == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back_and_a_short_file_is_an_error() {
        let mut w = Writer(BufWriter::new(Vec::new()));
        w.u8(7).unwrap();
        w.u32(70_000).unwrap();
        w.i64(-5).unwrap();
        w.str("zürich").unwrap();
        w.u32s(&[1, 2, 3]).unwrap();
        let bytes = w.0.into_inner().unwrap();
        let mut r = Reader::new(bytes.as_slice(), bytes.len() as u64);
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u32().unwrap(), 70_000);
        assert_eq!(r.i64().unwrap(), -5);
        assert_eq!(r.str().unwrap(), "zürich");
        assert_eq!(r.u32s().unwrap(), vec![1, 2, 3]);
        assert!(r.at_end());
        // A length claiming more than the file holds is refused before any allocation.
        let mut r = Reader::new(&bytes[..5], 5);
        r.u8().unwrap();
        let mut huge = Reader::new([0xff, 0xff, 0xff, 0xff].as_slice(), 4);
        assert!(huge.str().unwrap_err().contains("past the end"));
        assert!(r.u64().is_err());
    }
}
