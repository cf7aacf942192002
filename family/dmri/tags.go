package dmri

import "github.com/prismsbi/prism/family"

// Tags returns the family.Component tags of compartment c (family/tags.go).
func (c Compartment) Tags() []string {
	var t []string
	switch c {
	case Ball:
		t = []string{family.TagBall}
	case MultiShellBall:
		t = []string{family.TagBall, family.TagSharedDiffusivity}
	case Stick:
		t = []string{family.TagStick, family.TagOriented}
	case MultiShellStick:
		t = []string{family.TagStick, family.TagOriented, family.TagSharedDiffusivity}
	case WatsonStick, BinghamStick:
		t = []string{family.TagStick, family.TagOriented, family.TagDispersed}
	case Zeppelin:
		t = []string{family.TagZeppelin, family.TagOriented}
	case WatsonZeppelin, BinghamZeppelin:
		t = []string{family.TagZeppelin, family.TagOriented, family.TagDispersed}
	case Tensor:
		t = []string{family.TagTensor}
	case Dot:
		t = []string{family.TagDot}
	case NODDIWatson, NODDIBingham, SANDIWatson, SANDIBingham:
		t = []string{family.TagNeurite, family.TagOriented, family.TagDispersed}
	}
	return t
}
