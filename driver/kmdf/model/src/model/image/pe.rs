//! The image mapped as the kernel's loader maps a driver: each section at its RVA in one
//! allocation of SizeOfImage, the base relocations applied for where it landed, every import
//! bound to the address the resolver gives (none left unresolved), then each section given
//! the protection its characteristics ask for.

use std::string::String;
use std::vec::Vec;

use object::pe;
use object::read::pe::{ImageNtHeaders, ImageOptionalHeader, Import, PeFile64};
use object::LittleEndian as LE;

use super::memory::Region;

/// Why an image could not be loaded.
#[derive(Debug)]
pub(crate) enum LoadError {
    Read(String, std::io::Error),
    Parse(object::Error),
    NotAmd64Driver(String),
    Relocation(u16),
    Unresolved(String),
    Map(String),
    /// One image per scenario process.
    AlreadyLoaded,
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Read(path, e) => write!(f, "cannot read {path}: {e}"),
            Self::Parse(e) => write!(f, "not a PE image: {e}"),
            Self::NotAmd64Driver(why) => write!(f, "not an x64 kernel driver: {why}"),
            Self::Relocation(kind) => write!(f, "a base relocation of type {kind} (only DIR64)"),
            Self::Unresolved(name) => write!(f, "an import the model does not give: {name}"),
            Self::Map(why) => write!(f, "cannot map the image: {why}"),
            Self::AlreadyLoaded => write!(f, "an image is loaded already (one per process)"),
        }
    }
}

impl std::error::Error for LoadError {}

impl From<object::Error> for LoadError {
    fn from(e: object::Error) -> Self {
        Self::Parse(e)
    }
}

/// The image in memory.
pub(crate) struct Mapped {
    pub(crate) region: Region,
    /// FxDriverEntry's address.
    pub(crate) entry: usize,
    /// Each import as `DLL!name`, in the image's order.
    pub(crate) imports: Vec<String>,
    /// Each writable section as loaded (relocated): (offset, bytes), to load it afresh.
    pub(crate) writable: Vec<(usize, Vec<u8>)>,
    /// Where the executable sections are once mapped: a fault from elsewhere is not the
    /// image's register access.
    pub(crate) code: Vec<(usize, usize)>,
}

/// Maps `data` and binds each import `(dll, name)` to `resolve`'s address.
pub(crate) fn map(
    data: &[u8],
    resolve: &mut dyn FnMut(&str, &str) -> Option<usize>,
) -> Result<Mapped, LoadError> {
    let file = PeFile64::parse(data)?;
    let nt = file.nt_headers();
    let opt = nt.optional_header();
    if nt.file_header().machine.get(LE) != pe::IMAGE_FILE_MACHINE_AMD64 {
        return Err(LoadError::NotAmd64Driver("machine is not AMD64".into()));
    }
    if opt.subsystem() != pe::IMAGE_SUBSYSTEM_NATIVE {
        return Err(LoadError::NotAmd64Driver(format!(
            "subsystem {} (a driver's is NATIVE, 1)",
            opt.subsystem()
        )));
    }
    let size = opt.size_of_image() as usize;
    let mut region = Region::reserve(size).map_err(LoadError::Map)?;
    region.make_writable(0, size).map_err(LoadError::Map)?;
    let base = region.base();
    let image = region.bytes_mut();
    let headers = (opt.size_of_headers() as usize).min(data.len()).min(size);
    image[..headers].copy_from_slice(&data[..headers]);
    let sections = file.section_table();
    for s in sections.iter() {
        let rva = s.virtual_address.get(LE) as usize;
        let raw = s.pe_data(data)?;
        let n = raw.len().min(s.virtual_size.get(LE) as usize);
        let Some(to) = image.get_mut(rva..rva + n) else {
            return Err(LoadError::NotAmd64Driver(
                "a section past SizeOfImage".into(),
            ));
        };
        to.copy_from_slice(&raw[..n]);
    }
    relocate(&file, data, image, base)?;
    let imports = bind(&file, image, resolve)?;
    let writable = sections
        .iter()
        .filter(|s| s.characteristics.get(LE) & pe::IMAGE_SCN_MEM_WRITE != 0)
        .map(|s| {
            let at = s.virtual_address.get(LE) as usize;
            let len = (s.virtual_size.get(LE) as usize).min(size - at);
            (at, image[at..at + len].to_vec())
        })
        .collect();
    let code = sections
        .iter()
        .filter(|s| s.characteristics.get(LE) & pe::IMAGE_SCN_MEM_EXECUTE != 0)
        .map(|s| {
            let at = base + s.virtual_address.get(LE) as usize;
            (at, at + s.virtual_size.get(LE) as usize)
        })
        .collect();
    for s in sections.iter() {
        let c = s.characteristics.get(LE);
        let rva = s.virtual_address.get(LE) as usize;
        let len = s.virtual_size.get(LE) as usize;
        region
            .protect(
                rva,
                len,
                c & pe::IMAGE_SCN_MEM_WRITE != 0,
                c & pe::IMAGE_SCN_MEM_EXECUTE != 0,
            )
            .map_err(LoadError::Map)?;
    }
    region
        .protect(0, headers, false, false)
        .map_err(LoadError::Map)?;
    let entry = base + opt.address_of_entry_point() as usize;
    Ok(Mapped {
        region,
        entry,
        imports,
        writable,
        code,
    })
}

/// Adds to each DIR64 fixup the distance from the preferred base to where the image is.
fn relocate(
    file: &PeFile64<'_>,
    data: &[u8],
    image: &mut [u8],
    base: usize,
) -> Result<(), LoadError> {
    let delta = (base as u64).wrapping_sub(file.nt_headers().optional_header().image_base());
    let sections = file.section_table();
    let Some(blocks) = file.data_directories().relocation_blocks(data, &sections)? else {
        return Ok(());
    };
    for block in blocks {
        for r in block? {
            match r.typ {
                pe::IMAGE_REL_BASED_ABSOLUTE => {}
                pe::IMAGE_REL_BASED_DIR64 => {
                    let at = r.virtual_address as usize;
                    let Some(slot) = image.get_mut(at..at + 8) else {
                        return Err(LoadError::Relocation(r.typ));
                    };
                    let v = u64::from_le_bytes(slot.try_into().unwrap_or_default());
                    slot.copy_from_slice(&v.wrapping_add(delta).to_le_bytes());
                }
                other => return Err(LoadError::Relocation(other)),
            }
        }
    }
    Ok(())
}

/// Fills the import address table; an import the resolver does not know is refused.
fn bind(
    file: &PeFile64<'_>,
    image: &mut [u8],
    resolve: &mut dyn FnMut(&str, &str) -> Option<usize>,
) -> Result<Vec<String>, LoadError> {
    let mut names = Vec::new();
    let Some(table) = file.import_table()? else {
        return Ok(names);
    };
    for desc in table.descriptors()? {
        let desc = desc?;
        let dll = String::from_utf8_lossy(table.name(desc.name.get(LE))?).into_owned();
        let lookup = match desc.original_first_thunk.get(LE) {
            0 => desc.first_thunk.get(LE),
            rva => rva,
        };
        let mut thunks = table.thunks(lookup)?;
        let mut slot = desc.first_thunk.get(LE) as usize;
        while let Some(thunk) = thunks.next::<pe::ImageNtHeaders64>()? {
            let name = match table.import::<pe::ImageNtHeaders64>(thunk)? {
                Import::Name(_, name) => String::from_utf8_lossy(name).into_owned(),
                Import::Ordinal(n) => format!("#{n}"),
            };
            let Some(address) = resolve(&dll, &name) else {
                return Err(LoadError::Unresolved(format!("{dll}!{name}")));
            };
            let Some(to) = image.get_mut(slot..slot + 8) else {
                return Err(LoadError::Unresolved(format!(
                    "{dll}!{name}: IAT past the image"
                )));
            };
            to.copy_from_slice(&(address as u64).to_le_bytes());
            names.push(format!("{dll}!{name}"));
            slot += 8;
        }
    }
    Ok(names)
}
