# softrnic's install directories, for tools/ (the tool finds its libraries
# by a path relative to itself, baked in at compile time) and for
# SoftrnicInstall.cmake (the install rules). Safe to include more than once.
#
#   SOFTRNIC_INSTALL_PRIVATE_LIBDIR  the libraries' directory, relative to
#                                    the prefix: <libdir>/softrnic, e.g.
#                                    lib/softrnic, or
#                                    lib/x86_64-linux-gnu/softrnic for the
#                                    prefix /usr on Debian. Never a directory
#                                    the dynamic linker searches by itself:
#                                    softrnic's libibverbs.so.1 must not
#                                    shadow the system's.
#   SOFTRNIC_BINDIR_TO_LIBDIR        the same, relative to the bindir
#                                    (../lib/softrnic)
include(GNUInstallDirs)

set(SOFTRNIC_INSTALL_PRIVATE_LIBDIR "${CMAKE_INSTALL_LIBDIR}/softrnic")
if(IS_ABSOLUTE "${SOFTRNIC_INSTALL_PRIVATE_LIBDIR}")
	set(_srn_full_libdir "${SOFTRNIC_INSTALL_PRIVATE_LIBDIR}")
else()
	set(_srn_full_libdir
		"${CMAKE_INSTALL_PREFIX}/${SOFTRNIC_INSTALL_PRIVATE_LIBDIR}")
endif()
file(RELATIVE_PATH SOFTRNIC_BINDIR_TO_LIBDIR "${CMAKE_INSTALL_FULL_BINDIR}"
	"${_srn_full_libdir}")
unset(_srn_full_libdir)
