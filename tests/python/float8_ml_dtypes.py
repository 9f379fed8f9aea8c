"""ml_dtypes' float8 casts, for tests/float8.rs: reads little-endian f32 values from the
file named by argv[1] and prints, as JSON, for each float8 format: the f32 value of every
byte, the bytes the f32 values and their f64 widenings cast to, and every byte cast to
each other format."""
import json
import sys

import ml_dtypes
import numpy as np

FORMATS = ["float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz", "float8_e5m2fnuz"]

values = np.fromfile(sys.argv[1], dtype="<f4")
every_byte = np.arange(256, dtype=np.uint8)
out = {}
for name in FORMATS:
    f8 = getattr(ml_dtypes, name)
    as_f8 = every_byte.view(f8)
    out[name] = {
        "decode": as_f8.astype(np.float32).view(np.uint32).tolist(),
        "from_f32": values.astype(f8).view(np.uint8).tolist(),
        "from_f64": values.astype(np.float64).astype(f8).view(np.uint8).tolist(),
        "to": {other: as_f8.astype(getattr(ml_dtypes, other)).view(np.uint8).tolist() for other in FORMATS},
    }
print(json.dumps(out))
