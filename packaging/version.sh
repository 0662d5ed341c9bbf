#!/bin/sh
# Prints the version of the tree in the current git checkout, in a form
# that dpkg orders correctly, for make to stamp into flowdedup
# (--version), the Debian packages and the release archives:
#
#   v1.2.0 tagged on this commit        1.2.0
#   v1.3.0-rc1 tagged on this commit    1.3.0~rc1       (before 1.3.0)
#   commits after the tag v1.2.0        1.2.0+git20261122095555.1dc45b9
#   no v* tag at all                    0.0.0~git20261122095555.1dc45b9
#
# The git part is the commit's time (UTC, to the second, so that later
# commits sort later) and its abbreviated hash; "+dirty" follows when the
# tree has changes that are not committed. Exits 1 outside a git
# checkout: give make VERSION=... there.
set -eu
git rev-parse --git-dir >/dev/null 2>&1 || { echo "version.sh: not a git checkout; run make with VERSION=..." >&2; exit 1; }
commit=$(git rev-parse --short=7 HEAD)
when=$(TZ=UTC0 git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD)
dirty=
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	dirty=+dirty
fi
if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD 2>/dev/null); then
	base=$(printf '%s\n' "${tag#v}" | sed 's/-/~/')
	if [ "$(git rev-list -n 1 "$tag")" = "$(git rev-parse HEAD)" ]; then
		echo "$base$dirty"
	else
		echo "$base+git$when.$commit$dirty"
	fi
else
	echo "0.0.0~git$when.$commit$dirty"
fi
