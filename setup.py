"""Package discovery for olav; everything else lives in pyproject.toml.

``workspace_template/`` stays at the top of the repository, where people edit it, and is
shipped inside the wheel as the data-only package ``olav._template``. Its subfolders are
listed too, so setuptools neither warns about them nor leaves them out.
"""

from setuptools import find_namespace_packages, setup

TEMPLATE = "workspace_template"

setup(
    packages=[
        *find_namespace_packages(include=["olav", "olav.*"]),
        "olav._template",
        *(f"olav._template.{name}" for name in find_namespace_packages(where=TEMPLATE)),
    ],
    package_dir={"olav._template": TEMPLATE},
)
