"""Schema profiles: the built-ins load and compose, and broken files fail with messages that say what to fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from profiles import (
    LabelDef,
    Profile,
    ProfileError,
    RelationDef,
    available_modules,
    available_profiles,
    load_profile,
)

BASE_LABELS = ("Project", "Concept", "Decision", "Problem", "Technology", "Person", "Domain", "Client")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_base_has_the_eight_labels_the_fallbacks_and_links_to():
    profile = load_profile()
    assert profile.name == "base"
    assert profile.modules == ()
    for label in (*BASE_LABELS, "Note", "Insight"):
        assert profile.has_label(label)
        assert isinstance(profile.labels[label], LabelDef)
        assert profile.labels[label].description
    links = profile.relations["LINKS_TO"]
    assert isinstance(links, RelationDef)
    assert links.sources == links.targets == frozenset({"*"})


def test_base_relations_connect_what_reflect_needs():
    profile = load_profile()
    assert profile.allows("USES", "Project", "Technology")
    assert profile.allows("APPLIES", "Problem", "Concept")
    assert profile.allows("SOLVED_BY", "Problem", "Decision")
    assert profile.allows("HAS_PROBLEM", "Project", "Problem")
    assert profile.allows("WORKS_ON", "Person", "Project")
    assert profile.allows("FOR_CLIENT", "Project", "Client")
    assert profile.allows("ABOUT", "Insight", "Technology")
    assert not profile.allows("USES", "Technology", "Project")
    assert not profile.allows("NO_SUCH_RELATION", "Project", "Project")


def test_wildcard_relations_accept_labels_the_profile_does_not_know():
    profile = load_profile()
    assert profile.allows("links to", "Project", "SomethingOld")
    assert profile.allows("RELATED_TO", "Stub", "Note")
    assert not profile.allows("USES", "SomethingOld", "Technology")


def test_built_in_names_are_listed():
    assert {"base", "developer"} <= set(available_profiles())
    assert {"hacking", "teaching", "ai", "photography"} <= set(available_modules())


@pytest.mark.parametrize("profile_name", ["base", "developer"])
@pytest.mark.parametrize("module", available_modules())
def test_every_module_composes_with_each_built_in_profile(profile_name, module):
    profile = load_profile(profile_name, modules=[module])
    assert profile.modules == (module,)
    for rel in profile.relations.values():
        for label in rel.sources | rel.targets:
            assert label == "*" or profile.has_label(label), (rel.name, label)


def test_all_modules_compose_with_developer():
    profile = load_profile("developer", modules=available_modules())
    assert profile.name == "developer"
    for label in ("Library", "Course", "Vulnerability", "Technique", "Model", "Camera", "Insight"):
        assert profile.has_label(label)
    assert profile.allows("COVERS", "Course", "Concept")
    assert profile.allows("TEACHES", "Course", "Technology")
    assert profile.allows("USES", "Course", "Technology")
    assert profile.allows("USED_IN", "Technique", "Domain")
    assert profile.allows("EXPLOITS", "Vulnerability", "Concept")


def test_developer_extends_base():
    profile = load_profile("developer")
    assert set(BASE_LABELS) <= set(profile.label_names())
    assert profile.has_label("Library")
    assert "repository" in profile.labels["Project"].properties  # from base
    assert "language" in profile.labels["Project"].properties  # added by developer


def test_a_label_defined_in_two_files_gets_the_union_of_properties(tmp_path):
    write(
        tmp_path / "modules" / "gigs.yaml",
        """
        labels:
          Project:
            properties: [venue, status]
        """,
    )
    profile = load_profile("base", modules=["gigs"], search_path=tmp_path)
    props = profile.labels["Project"].properties
    assert props[:4] == ("status", "repository", "started", "ended")
    assert "venue" in props
    assert props.count("status") == 1
    # A module fills gaps but does not take over what base already said.
    assert profile.labels["Project"].description == load_profile().labels["Project"].description


def test_the_same_relation_in_two_files_is_merged_with_both_endpoints(tmp_path):
    write(
        tmp_path / "modules" / "music.yaml",
        """
        labels:
          Instrument:
            description: Something played.
        relations:
          uses:
            from: Person
            to: [Instrument]
        """,
    )
    profile = load_profile("base", modules=["music"], search_path=tmp_path)
    assert profile.relation_names().count("USES") == 1
    uses = profile.relations["USES"]
    assert {"Project", "Person"} <= uses.sources
    assert {"Technology", "Instrument"} <= uses.targets
    assert profile.folder_for("Instrument") == "Instruments"


def test_a_module_naming_an_unknown_label_fails_naming_file_and_label(tmp_path):
    module = write(
        tmp_path / "typo.yaml",
        """
        labels:
          Vulnerability:
            description: A weakness.
        relations:
          EXPLOITS:
            from: [Vulnerability]
            to: [Vulnrability]
        """,
    )
    with pytest.raises(ProfileError) as caught:
        load_profile("base", modules=[str(module)])
    message = str(caught.value)
    assert "typo.yaml" in message
    assert "EXPLOITS" in message
    assert "'Vulnrability'" in message
    assert "did you mean 'Vulnerability'" in message
    assert isinstance(caught.value, ValueError)


def test_an_unknown_module_fails_listing_the_available_ones():
    with pytest.raises(ProfileError, match="unknown module 'knitting'") as caught:
        load_profile("base", modules=["knitting"])
    for module in ("ai", "hacking", "photography", "teaching"):
        assert module in str(caught.value)


def test_an_unknown_profile_fails_listing_the_available_ones():
    with pytest.raises(ProfileError, match="unknown profile 'nope'.*base, developer"):
        load_profile("nope")


def test_invalid_yaml_names_the_file_and_the_line(tmp_path):
    bad = write(
        tmp_path / "broken.yaml",
        """\
        extends: base
        labels:
          Thing:
            description: [unclosed
        """,
    )
    with pytest.raises(ProfileError) as caught:
        load_profile(str(bad))
    message = str(caught.value)
    assert "broken.yaml" in message
    assert "line 5" in message
    assert "invalid YAML" in message


def test_a_misspelt_key_is_reported_instead_of_ignored(tmp_path):
    bad = write(
        tmp_path / "mine.yaml",
        """
        extends: base
        labels:
          Recipe:
            description: Something to cook.
            propertis: [servings]
        """,
    )
    with pytest.raises(ProfileError, match=r"mine\.yaml: unknown key 'propertis' in label Recipe"):
        load_profile(str(bad))


def test_a_new_label_without_description_fails(tmp_path):
    write(tmp_path / "modules" / "bare.yaml", "labels:\n  Gadget:\n    folder: Gadgets\n")
    with pytest.raises(ProfileError, match=r"bare\.yaml: label Gadget has no description"):
        load_profile("base", modules=["bare"], search_path=tmp_path)


def test_two_labels_cannot_share_a_folder(tmp_path):
    write(
        tmp_path / "modules" / "clash.yaml", "labels:\n  Job:\n    description: Work.\n    folder: projects\n"
    )
    with pytest.raises(ProfileError, match="folder 'projects', which already belongs to label Project"):
        load_profile("base", modules=["clash"], search_path=tmp_path)


def test_a_profile_without_the_fallback_labels_is_refused(tmp_path):
    lonely = write(tmp_path / "lonely.yaml", "labels:\n  Thing:\n    description: A thing.\n")
    with pytest.raises(ProfileError, match="lacks Note, Insight, LINKS_TO, ABOUT.*extends: base"):
        load_profile(str(lonely))


def test_a_user_profile_extends_by_path_and_overrides_folders(tmp_path):
    write(tmp_path / "parent.yaml", "extends: developer\nmodules: [teaching]\ndecay_rate: 0.01\n")
    child = write(
        tmp_path / "sub" / "child.yaml",
        """
        name: mine
        extends: ../parent.yaml
        labels:
          Project:
            folder: Work
        """,
    )
    profile = load_profile(str(child), modules=["ai"])
    assert profile.name == "mine"
    assert profile.modules == ("teaching", "ai")
    assert profile.folder_for("project") == "Work"
    assert profile.has_label("Library") and profile.has_label("Course") and profile.has_label("Model")
    assert profile.default_decay_rate == 0.01
    assert profile.decay_rate_for("Concept") == 0.002  # a label's own rate beats the default
    assert profile.decay_rate_for("Unknown") == 0.01


def test_an_extends_loop_is_reported(tmp_path):
    write(tmp_path / "a.yaml", "extends: b.yaml\n")
    write(tmp_path / "b.yaml", "extends: a.yaml\n")
    with pytest.raises(ProfileError, match="`extends` loops"):
        load_profile(str(tmp_path / "a.yaml"))


@pytest.mark.parametrize("spelling", ["uses", "Uses", "USES", " uses "])
def test_canonical_relation_accepts_any_case(spelling):
    assert load_profile().canonical_relation(spelling) == "USES"


@pytest.mark.parametrize("spelling", ["has problem", "Has-Problem", "has_problem", "HAS  PROBLEM"])
def test_canonical_relation_turns_spaces_and_dashes_into_underscores(spelling):
    assert load_profile().canonical_relation(spelling) == "HAS_PROBLEM"


def test_canonical_label_returns_the_profile_spelling_or_none():
    profile = load_profile()
    assert profile.canonical_label("project") == "Project"
    assert profile.canonical_label(" TECHNOLOGY ") == "Technology"
    assert profile.canonical_label("Projects") is None
    assert profile.canonical_relation("no such thing") is None
    assert not profile.has_label("Spaceship")


def test_folders_map_to_labels_and_back():
    profile = load_profile("base", modules=["teaching"])
    assert profile.folder_for("Person") == "People"
    assert profile.folder_for("Project") == "Projects"
    assert profile.folder_for("Spaceship") == "Notes"
    folders = profile.folder_labels()
    assert folders["People"] == "Person"
    assert folders["Courses"] == "Course"
    assert folders["Notes"] == "Note"
    assert len(folders) == len(profile.labels)


def test_label_for_path_matches_the_first_folder_case_insensitively():
    profile = load_profile()
    assert profile.label_for_path("projects/engrama.md") == "Project"
    assert profile.label_for_path("People/Ada/notes.md") == "Person"
    assert profile.label_for_path("Archive/Projects/old.md") is None
    assert profile.label_for_path("Projects.md") is None


def test_a_profile_is_frozen():
    profile = load_profile()
    assert isinstance(profile, Profile)
    with pytest.raises(AttributeError):
        profile.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        profile.labels["Spaceship"] = profile.labels["Project"]  # type: ignore[index]


def test_describe_lists_labels_and_relations():
    text = load_profile("base", modules=["hacking"]).describe()
    assert "Profile base + hacking" in text
    assert "- Vulnerability (folder Vulnerabilities)" in text
    assert "- LINKS_TO: * -> *" in text
