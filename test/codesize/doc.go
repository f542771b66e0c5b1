// Package codesize is a smoke alarm for code that has outgrown a reader: no
// file over 800 lines and no function over 120, its doc comment included,
// in any module of the repository. It is not a layout rule: a type's
// methods belong in its own file, however long. Tests and generated code
// are exempt.
package codesize
