"""Keep the LLVM inside PoCL (OpenCL on the CPU) and Mesa's lavapipe (Vulkan on the CPU)
apart from TensorFlow's.

TensorFlow's Python package loads its libraries with their symbols global, LLVM's among
them. A driver built on LLVM that is loaded later (PoCL through the OpenCL ICD loader,
lavapipe through the Vulkan loader) then binds its LLVM calls to TensorFlow's copy and
crashes (in `llvm::cl::Option::addArgument` while PoCL's libclang-cpp initialises, or in
lavapipe's JIT). Loading those drivers first with `RTLD_DEEPBIND` makes each prefer its own
dependencies' symbols; the loaders' later `dlopen` of the same file returns this handle.
Only these CPU drivers are loaded this way: GPU vendors' drivers are left to the loaders."""

import ctypes
import glob
import json
import os
import sys

# File names of the LLVM-based CPU drivers this applies to.
_LLVM_DRIVERS = ("libpocl", "libvulkan_lvp")

# The handles, kept for the life of the process.
_loaded = []


def _opencl_icds():
    """The libraries the OpenCL ICD loader will open (`OCL_ICD_VENDORS` or
    `/etc/OpenCL/vendors/*.icd`)."""
    vendors = os.environ.get("OCL_ICD_VENDORS", "/etc/OpenCL/vendors")
    files = glob.glob(os.path.join(vendors, "*.icd")) if os.path.isdir(vendors) else [vendors]
    libraries = []
    for file in files:
        try:
            with open(file) as f:
                libraries.append(f.read().strip())
        except OSError:
            continue
    return libraries


def _vulkan_icds():
    """The libraries the Vulkan loader will open (`VK_DRIVER_FILES`, `VK_ICD_FILENAMES`, or
    the manifests in the standard folders)."""
    listed = os.environ.get("VK_DRIVER_FILES") or os.environ.get("VK_ICD_FILENAMES")
    if listed:
        manifests = listed.split(os.pathsep)
    else:
        manifests = [
            m
            for folder in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d")
            for m in glob.glob(os.path.join(folder, "*.json"))
        ]
    libraries = []
    for manifest in manifests:
        try:
            with open(manifest) as f:
                libraries.append(json.load(f)["ICD"]["library_path"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return libraries


def isolate_llvm_drivers():
    """Load PoCL and lavapipe with `RTLD_DEEPBIND`, where they are installed (Linux only).
    A driver that fails to load is left to its loader, which reports why."""
    if not sys.platform.startswith("linux") or not hasattr(os, "RTLD_DEEPBIND"):
        return
    for library in _opencl_icds() + _vulkan_icds():
        if not os.path.basename(library).startswith(_LLVM_DRIVERS):
            continue
        try:
            _loaded.append(
                ctypes.CDLL(library, mode=os.RTLD_DEEPBIND | os.RTLD_NOW | os.RTLD_LOCAL)
            )
        except OSError:
            continue
