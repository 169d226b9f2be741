# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
#
# cmake -DABI_HEADER=<bzc-abi.h> -DABI_CHECK=<abi_check.c> -P bzc_abi_coverage.cmake
#
# Fails unless every "struct NAME {" defined in ABI_HEADER has a
# "BZC_CHECK_SIZE(NAME," line in ABI_CHECK, so a struct added to the uAPI
# cannot skip the i386/x32/x86_64 layout check.
foreach(var ABI_HEADER ABI_CHECK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "bzc_abi_coverage.cmake: ${var} not set")
  endif()
endforeach()

file(STRINGS "${ABI_HEADER}" _defs REGEX "^[ \t]*struct[ \t]+[A-Za-z0-9_]+[ \t]*{")
file(READ "${ABI_CHECK}" _check)

set(_missing "")
set(_count 0)
foreach(_line IN LISTS _defs)
  string(REGEX REPLACE "^[ \t]*struct[ \t]+([A-Za-z0-9_]+).*$" "\\1" _name "${_line}")
  math(EXPR _count "${_count} + 1")
  if(NOT _check MATCHES "BZC_CHECK_SIZE\\(${_name},")
    list(APPEND _missing "${_name}")
  endif()
endforeach()

if(_missing)
  string(REPLACE ";" ", " _missing "${_missing}")
  message(FATAL_ERROR
    "${ABI_CHECK} has no BZC_CHECK_SIZE() for: ${_missing} "
    "(defined in ${ABI_HEADER}). Add size and offset checks for every member.")
endif()
if(_count EQUAL 0)
  message(FATAL_ERROR "no struct definitions found in ${ABI_HEADER}")
endif()
