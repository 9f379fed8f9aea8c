//! `PT_DeviceList`: the devices this machine has, by name and description.

use std::ffi::{c_char, c_int, CString};
use std::ptr::null_mut;

use polytensor::Error;

use crate::status::{arg, guard, PT_Status};

/// The devices found (`cpu:0`, `opencl:0`, ...), with their descriptions.
pub struct PT_DeviceList {
    devices: Vec<(CString, CString)>,
}

/// The available devices, in order of preference. NULL on error.
///
/// # Safety
///
/// `status` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_ListDevices(status: *mut PT_Status) -> *mut PT_DeviceList {
    guard(status, null_mut(), || {
        let text = |s: String| CString::new(s.replace('\0', " ")).unwrap_or_default();
        let devices = polytensor::devices()
            .iter()
            .filter_map(|e| e.device())
            .map(|d| (text(d.name().to_string()), text(d.description())))
            .collect();
        Ok(Box::into_raw(Box::new(PT_DeviceList { devices })))
    })
}

/// The number of devices in `list` (0 for NULL).
///
/// # Safety
///
/// `list` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_DeviceListCount(list: *const PT_DeviceList) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { list.as_ref() }.map_or(0, |l| l.devices.len() as c_int)
}

/// Device `index`'s (name, description), or an `Err`.
///
/// # Safety
///
/// `list` is NULL or live for `'a`.
unsafe fn entry<'a>(
    list: *const PT_DeviceList,
    index: c_int,
) -> Result<&'a (CString, CString), Error> {
    // SAFETY: the caller's contract.
    let list = unsafe { arg(list, "list") }?;
    usize::try_from(index)
        .ok()
        .and_then(|i| list.devices.get(i))
        .ok_or_else(|| {
            Error::invalid(format!(
                "no device {index} in a list of {}",
                list.devices.len()
            ))
        })
}

/// The name of device `index` (`cpu:0`), valid while the list lives; NULL on error.
///
/// # Safety
///
/// `list` is NULL or live; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_DeviceListName(
    list: *const PT_DeviceList,
    index: c_int,
    status: *mut PT_Status,
) -> *const c_char {
    guard(status, std::ptr::null(), || {
        // SAFETY: the caller's contract.
        Ok(unsafe { entry(list, index) }?.0.as_ptr())
    })
}

/// The description of device `index` (hardware, driver), valid while the list lives; NULL
/// on error.
///
/// # Safety
///
/// `list` is NULL or live; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_DeviceListDescription(
    list: *const PT_DeviceList,
    index: c_int,
    status: *mut PT_Status,
) -> *const c_char {
    guard(status, std::ptr::null(), || {
        // SAFETY: the caller's contract.
        Ok(unsafe { entry(list, index) }?.1.as_ptr())
    })
}

/// Free a device list (NULL is ignored).
///
/// # Safety
///
/// `list` is NULL or a list from [`PT_ListDevices`], not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn PT_DeleteDeviceList(list: *mut PT_DeviceList) {
    if !list.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(list) });
    }
}
