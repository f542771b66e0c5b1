// Package codesize keeps the project's Go code in pieces a reviewer can hold
// at once: no file over 400 lines and no function over 60, its doc comment
// included, in any module of the repository. Tests and generated code are
// exempt.
package codesize
