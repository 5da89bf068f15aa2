package export

import (
	"path/filepath"
	"regexp"
	"strings"
)

var (
	// newStyle is an arXiv identifier of April 2007 on: YYMM.NNNN(N), maybe a version.
	newStyle = regexp.MustCompile(`^(\d{2})(0[1-9]|1[0-2])\.\d{4,5}(v\d+)?$`)
	// oldStyle is one from before: archive(.SC)/YYMMNNN, the slash dropped in a file name.
	oldStyle = regexp.MustCompile(`^[a-z][a-z-]*(\.[A-Za-z]{2})?/?(\d{2})(0[1-9]|1[0-2])\d{3}(v\d+)?$`)
)

// Month is the month of the arXiv identifier an entry's path names, YYYY-MM, from its file name
// (without .zip) or its directory's: 1905.12345 is 2019-05, math/0211159 (or math0211159) is
// 2002-11. It is "unknown" when neither names one.
func Month(entry string) string {
	stem := strings.TrimSuffix(filepath.Base(entry), ".zip")
	dir := filepath.Base(filepath.Dir(entry))
	for _, c := range []string{stem, dir, dir + "/" + stem, filepath.Base(filepath.Dir(filepath.Dir(entry))) + "/" + dir} {
		if m := newStyle.FindStringSubmatch(c); m != nil {
			return "20" + m[1] + "-" + m[2]
		}
		if m := oldStyle.FindStringSubmatch(c); m != nil {
			century := "20"
			if m[2] >= "91" {
				century = "19"
			}
			return century + m[2] + "-" + m[3]
		}
	}
	return "unknown"
}
