// Package all links every built-in model family and the family spec
// loader into a program: importing it (for its side effects) registers
// lingauss-k6, the symbolic-regression families and the dMRI families
// under their names and lets family.FromSpec read spec files. Adding a
// family means one line here; no other package outside family/ names a
// concrete family (TestOnlyFamilyPackagesNameFamilies).
package all

import (
	_ "github.com/prismsbi/prism/family/dmri"     // b3s, b3s-brain, bszt, bszt-conv
	_ "github.com/prismsbi/prism/family/lingauss" // lingauss-k6
	_ "github.com/prismsbi/prism/family/spec"     // family spec files (docs/spec.md)
	_ "github.com/prismsbi/prism/family/symbolic" // symbolic-k15 … symbolic-k100
)
