#!/usr/bin/env python3
"""Tests of scripts/gen-bindings.py on small headers and templates (stdlib
unittest; run by `make lint`): the expansions, and that a shape the script
does not know stops it with a message naming it."""

import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("gen_bindings", os.path.join(HERE, "gen-bindings.py"))
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)

HEADER = """
#define DDS_ANSWER 42
typedef enum dds_status {
  DDS_OK = 0,
  DDS_ERR_X = 1,
} dds_status;
typedef struct dds_store dds_store;
typedef struct dds_pair {
  uint32_t struct_size;
  int64_t a;
  char tag[8];
} dds_pair;
#ifdef __cplusplus
extern "C" {
#endif // __cplusplus
// Does the thing. More words.
enum dds_status dds_thing(struct dds_store *store, const char *name);
enum dds_status dds_pair_get(struct dds_store *store, struct dds_pair *out, int32_t *n);
#ifdef __cplusplus
}
#endif
"""

TEMPLATE = """module m
!@insert constants
!@insert structs
!@insert generics
contains
!@thin dds_thing
!@template dds_put put_${K}_${R} ranks=1,2
  subroutine put_${K}_${R}(a)
    ${T}, intent(in) :: a${DIMS}
!@2d    ! cols ${COLS}
  end subroutine put_${K}_${R}
!@end-template
end module m"""


class Expansion(unittest.TestCase):
    def setUp(self):
        self.parts = gen.parse_header(HEADER)

    def test_header_lists(self):
        defines, statuses, structs, functions, docs = self.parts
        self.assertEqual(defines, [("DDS_ANSWER", 42)])
        self.assertEqual(statuses, [("DDS_OK", 0), ("DDS_ERR_X", 1)])
        self.assertIsNone(structs["dds_store"])
        self.assertEqual(structs["dds_pair"][2], ("char", "tag", 8))
        self.assertEqual([f[1] for f in functions], ["dds_thing", "dds_pair_get"])
        self.assertEqual(docs["dds_thing"], "Does the thing.")

    def test_fortran(self):
        out = gen.gen_fortran(TEMPLATE, self.parts)
        self.assertIn("integer(c_int), parameter, public :: DDS_ERR_X = 1", out)
        self.assertIn("integer(c_int32_t), parameter, public :: DDS_ANSWER = 42", out)
        self.assertIn("character(kind=c_char) :: tag(8) = c_null_char", out)
        self.assertIn("module procedure put_i1_1d, put_i4_1d", out)
        self.assertIn("real(c_double), intent(in) :: a(:, :)", out)
        self.assertEqual(out.count("\n    ! cols size(a, 1, c_int64_t)\n"), 5)  # rank-2 lines only, indented
        self.assertIn("  ! Does the thing.\n  subroutine dds_thing(store, name, status)", out)
        self.assertNotIn("!@", out)

    def test_friendly_copy_and_string(self):
        header = HEADER.replace("  int64_t a;", "  // The a. More.\n  int64_t a;\n  int32_t on;").replace(
            "#ifdef __cplusplus\n}", "// Name of code, e.g. `\"X\"`. Details.\nconst char *dds_name(int32_t code);\n"
            "#ifdef __cplusplus\n}")
        template = TEMPLATE.replace("contains", "!@friendly dds_pair pair_t logical=on string=tag skip=struct_size\n"
                                    "contains\n!@copy dds_pair raw x\n!@string dds_name")
        out = gen.gen_fortran(template, gen.parse_header(header))
        self.assertIn("integer(c_int64_t) :: a = 0", out)
        self.assertIn("! The a.\n", out)
        self.assertIn("logical :: on = .false.", out)
        self.assertIn("character(len=8) :: tag = ''", out)
        self.assertIn("x%a = raw%a\nx%on = raw%on /= 0\nx%tag = from_c(c_loc(raw%tag))", out)
        self.assertIn("! Name of code, e.g. `\"X\"`.\n  function dds_name(code) result(s)", out)
        self.assertIn("s = from_c(c_dds_name(int(code, c_int32_t)))", out)

    def test_query(self):
        header = HEADER.replace("#ifdef __cplusplus\n}", "enum dds_status dds_pair_of(struct dds_store *store, "
                                "const char *name, struct dds_pair *out);\n#ifdef __cplusplus\n}")
        template = TEMPLATE.replace("contains", "!@friendly dds_pair pair_t string=tag skip=struct_size\n"
                                    "contains\n  ! Fills a pair.\n!@query dds_pair_of pair")
        out = gen.gen_fortran(template, gen.parse_header(header))
        self.assertIn("""  ! Fills a pair.
  subroutine dds_pair_of(store, name, pair, status)
    type(dds_store_t), intent(in) :: store
    character(len=*), intent(in) :: name
    type(pair_t), intent(out) :: pair
    integer, intent(out), optional :: status
    type(c_dds_pair), target :: raw
    integer(c_int) :: st
    raw%struct_size = int(c_sizeof(raw), c_int32_t)
    st = c_dds_pair_of(store%handle, c_chars(name), raw)
    if (st == DDS_OK) then
      pair%a = raw%a
      pair%tag = from_c(c_loc(raw%tag))
    end if
    call finish(st, status)
  end subroutine dds_pair_of
""", out)
        # Without a string field the raw struct needs no target.
        out = gen.gen_fortran(template.replace("string=tag skip=struct_size", "skip=struct_size,tag"),
                              gen.parse_header(header))
        self.assertIn("    type(c_dds_pair) :: raw\n", out)

    def test_template_of_two_generics(self):
        template = TEMPLATE.replace("!@template dds_put put_${K}_${R} ranks=1,2",
                                    "!@template dds_put put_${K}_${R} dds_put_all put_all_${K}_${R} ranks=1,2")
        template = template.replace("subroutine put_${K}_${R}", "subroutine ${N}").replace(
            "  end subroutine ${N}", "!@dds_put_all    call all()\n  end subroutine ${N}")
        out = gen.gen_fortran(template, self.parts)
        self.assertIn("  interface dds_put\n    module procedure put_i1_1d, put_i4_1d", out)
        self.assertIn("  interface dds_put_all\n    module procedure put_all_i1_1d, put_all_i4_1d", out)
        self.assertIn("    real(c_double), intent(in) :: a(:)\n  end subroutine put_r8_1d\n", out)
        self.assertIn("    real(c_double), intent(in) :: a(:)\n    call all()\n  end subroutine put_all_r8_1d\n", out)
        self.assertEqual(out.count("call all()"), 10)
        # Every dds_put specific comes before the first dds_put_all one.
        self.assertLess(out.index("subroutine put_r8_2d("), out.index("subroutine put_all_i1_1d("))

    def test_raw_interfaces(self):
        choices = gen.Choices()
        lines = "\n".join(gen.gen_raw_interfaces(self.parts[3], self.parts[2], choices))
        self.assertIn("type(c_dds_pair), intent(inout) :: out", lines)
        self.assertIn("type(c_ptr), value :: n", lines)  # a pointer is an address unless !@out-scalar
        choices.out_scalars.add(("dds_pair_get", "n"))
        lines = "\n".join(gen.gen_raw_interfaces(self.parts[3], self.parts[2], choices))
        self.assertIn("integer(c_int32_t), intent(out) :: n", lines)

    def test_python(self):
        self.assertIn("DDS_ERR_X = 1\n", gen.gen_python(self.parts))


class Refusals(unittest.TestCase):
    def refused(self, header, template, words):
        with self.assertRaises(gen.GenError) as cm:
            gen.gen_fortran(template, gen.parse_header(header))
        for w in words:
            self.assertIn(w, str(cm.exception))

    def test_unknown_parameter_type(self):
        header = HEADER.replace("int32_t *n", "float *n")
        self.refused(header, TEMPLATE.replace("!@insert generics", "!@insert generics\n!@insert raw-interfaces"),
                     ["dds_pair_get", "'float *'"])

    def test_unknown_directive(self):
        self.refused(HEADER, TEMPLATE + "\n!@insrt constants", ["unknown directive", "!@insrt"])

    def test_thin_with_other_arguments(self):
        self.refused(HEADER, TEMPLATE.replace("!@thin dds_thing", "!@thin dds_pair_get"),
                     ["dds_pair_get", "write its wrapper"])

    def test_friendly_of_an_unknown_field(self):
        self.refused(HEADER, TEMPLATE + "\n!@friendly dds_pair pair_t skip=nope", ["dds_pair", "nope"])

    def test_friendly_of_an_array(self):
        self.refused(HEADER, TEMPLATE + "\n!@friendly dds_pair pair_t", ["dds_pair.tag", "array"])

    def test_copy_without_friendly(self):
        self.refused(HEADER, TEMPLATE + "\n!@copy dds_pair raw x", ["!@friendly"])

    def test_query_of_another_shape(self):
        template = TEMPLATE.replace("contains", "!@friendly dds_pair pair_t string=tag\ncontains")
        self.refused(HEADER, template + "\n!@query dds_pair_get pair", ["dds_pair_get", "write its wrapper"])
        self.refused(HEADER, template + "\n!@query dds_nope pair", ["!@query needs a function"])

    def test_query_without_friendly(self):
        header = HEADER.replace("struct dds_pair *out, int32_t *n", "struct dds_pair *out")
        self.refused(header, TEMPLATE + "\n!@query dds_pair_get pair", ["dds_pair", "!@friendly"])

    def test_string_of_a_status_function(self):
        self.refused(HEADER, TEMPLATE + "\n!@string dds_thing", ["dds_thing", "C string"])

    def test_unknown_selector(self):
        self.refused(HEADER, TEMPLATE.replace("!@2d    ! cols", "!@3d    ! cols"), ["unknown selector !@3d"])
        self.refused(HEADER, TEMPLATE.replace("!@2d    ! cols", "!@dds_get    ! cols"), ["!@dds_get", "dds_put"])

    def test_unterminated_template(self):
        self.refused(HEADER, TEMPLATE.replace("!@end-template", ""), ["without !@end-template"])

    def test_enum_without_values(self):
        with self.assertRaises(gen.GenError) as cm:
            gen.parse_header(HEADER.replace("DDS_ERR_X = 1", "DDS_ERR_X"))
        self.assertIn("no explicit value", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
