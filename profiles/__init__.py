"""Schema profiles (YAML) and the loader that validates and composes them.

`load_profile("developer", modules=["hacking"])` returns a frozen `Profile`; callers hold on to it.
"""

from profiles.errors import ProfileError
from profiles.loader import available_modules, available_profiles, load_profile
from profiles.schema import WILDCARD, LabelDef, Profile, RelationDef

__all__ = [
    "WILDCARD",
    "LabelDef",
    "Profile",
    "ProfileError",
    "RelationDef",
    "available_modules",
    "available_profiles",
    "load_profile",
]
