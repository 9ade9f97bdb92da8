# Install rules and the Debian package of softrnic.
#
#   cmake --install BUILD [--prefix P]    default prefix /usr/local
#   cd BUILD && cpack                     softrnic_<version>_<arch>.deb,
#                                         prefix /usr
#
# What goes where, under the prefix (<libdir> from GNUInstallDirs: lib, or
# lib/<multiarch> for the prefix /usr on Debian):
#
#   bin/softrnic                      the tool; finds the libraries by
#                                     their path relative to itself
#   <libdir>/softrnic/                the libraries, libibverbs.so.1 ...: a
#                                     private directory the dynamic linker
#                                     never searches by itself, so the
#                                     system's libibverbs is never shadowed
#   include/softrnic/                 softrnic's extension headers
#   <libdir>/pkgconfig/softrnic.pc    links a program with the private
#                                     libraries (-L and -rpath)
#   share/man/man1/softrnic.1         softrnic(1)
#   share/doc/softrnic/README.md
#   lib/systemd/system/softrnic.{socket,service}
#                                     the optional host daemon (`softrnic
#                                     daemon`, docs/security.md); not
#                                     enabled by the package
#
# Tests and benchmarks have no install rules: they are never installed.
include(${CMAKE_CURRENT_LIST_DIR}/SoftrnicDirs.cmake)

# Every library softrnic ships (targets): each goes to the private
# directory, with its SONAME link and its unversioned link (the latter is
# what -libverbs finds through softrnic.pc; it is in the private directory,
# never in a system one). librdmacm.so.1 (rdmacm) sits beside
# libibverbs.so.1, so softrnic exec puts both first.
set(SOFTRNIC_INSTALL_LIBRARIES ibverbs rdmacm softrnic_rpc)

install(TARGETS ${SOFTRNIC_INSTALL_LIBRARIES}
	LIBRARY DESTINATION ${SOFTRNIC_INSTALL_PRIVATE_LIBDIR})
install(TARGETS softrnic RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Headers: <softrnic/softrnic.h>, <softrnic/direct.h> and the generated
# <softrnic/version.h>.
set(SOFTRNIC_GENERATED_INCLUDE_DIR ${CMAKE_BINARY_DIR}/include)
configure_file(${PROJECT_SOURCE_DIR}/include/softrnic/version.h.in
	${SOFTRNIC_GENERATED_INCLUDE_DIR}/softrnic/version.h @ONLY)
install(FILES ${PROJECT_SOURCE_DIR}/include/softrnic/softrnic.h
	${PROJECT_SOURCE_DIR}/include/softrnic/direct.h
	${PROJECT_SOURCE_DIR}/include/softrnic/rpc.h
	${SOFTRNIC_GENERATED_INCLUDE_DIR}/softrnic/version.h
	DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/softrnic)

# softrnic.pc is written at install time, for the prefix actually installed
# into (cmake --install --prefix, or cpack's /usr), then installed.
# softrnic-rpc.pc the same way, for libsoftrnic_rpc.
foreach(pc softrnic softrnic-rpc)
set(SOFTRNIC_PC_FILE ${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc)
install(CODE "
	set(SRN_PC_TEMPLATE \"${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in\")
	set(SRN_PC_FILE \"${SOFTRNIC_PC_FILE}\")
	set(SRN_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
	set(SRN_PC_LIBDIR \"${SOFTRNIC_INSTALL_PRIVATE_LIBDIR}\")
	set(SRN_PC_VERSION \"${PROJECT_VERSION}\")")
install(CODE [[
	set(SRN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
	foreach(dir SRN_PC_INCLUDEDIR SRN_PC_LIBDIR)
		if(NOT IS_ABSOLUTE "${${dir}}")
			set(${dir} "\${prefix}/${${dir}}")
		endif()
	endforeach()
	file(READ "${SRN_PC_TEMPLATE}" srn_pc)
	string(CONFIGURE "${srn_pc}" srn_pc @ONLY)
	file(WRITE "${SRN_PC_FILE}" "${srn_pc}")
]])
install(FILES ${SOFTRNIC_PC_FILE}
	DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

install(FILES ${PROJECT_SOURCE_DIR}/docs/man/softrnic.1
	DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# The host daemon's systemd units (dist/systemd/): the service names the
# tool by its installed path, written at install time like softrnic.pc.
set(SOFTRNIC_SYSTEMD_UNITDIR lib/systemd/system CACHE STRING
	"where the systemd units go, under the prefix")
set(SOFTRNIC_SERVICE_FILE ${CMAKE_BINARY_DIR}/systemd/softrnic.service)
install(CODE "
	set(SRN_SVC_TEMPLATE \"${PROJECT_SOURCE_DIR}/dist/systemd/softrnic.service.in\")
	set(SRN_SVC_FILE \"${SOFTRNIC_SERVICE_FILE}\")
	set(SRN_BINDIR \"${CMAKE_INSTALL_BINDIR}\")")
install(CODE [[
	if(NOT IS_ABSOLUTE "${SRN_BINDIR}")
		set(SRN_BINDIR "${CMAKE_INSTALL_PREFIX}/${SRN_BINDIR}")
	endif()
	file(READ "${SRN_SVC_TEMPLATE}" srn_svc)
	string(CONFIGURE "${srn_svc}" srn_svc @ONLY)
	file(WRITE "${SRN_SVC_FILE}" "${srn_svc}")
]])
install(FILES ${SOFTRNIC_SERVICE_FILE}
	${PROJECT_SOURCE_DIR}/dist/systemd/softrnic.socket
	DESTINATION ${SOFTRNIC_SYSTEMD_UNITDIR})
install(FILES ${PROJECT_SOURCE_DIR}/README.md
	DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Installs into a temporary prefix and checks the tree and the installed
# tool (no root needed; the .deb is scripts/package-test.sh's).
# Not in sanitizer builds: their libraries need the sanitizer's runtime.
if(NOT SRN_SANITIZE)
	add_test(NAME install_tree
		COMMAND ${PROJECT_SOURCE_DIR}/tests/install/check_install.sh
			${CMAKE_BINARY_DIR} ${CMAKE_COMMAND})
	set_tests_properties(install_tree PROPERTIES LABELS install
		TIMEOUT 120)
endif()

# The Debian package: cpack in the build directory.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME softrnic)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "softrnic developers <softrnic@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
	"software RDMA NIC in user space, with its own libibverbs")
# The extended description; cpack puts the summary above it.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
	"softrnic is an RDMA NIC made of software: unmodified verbs programs
(ibverbs-utils, perftest, your own) run on a machine with no RDMA
hardware and no kernel module, through 'softrnic exec -- PROGRAM'.
Its libibverbs.so.1, ABI-compatible with rdma-core 44, lives in a private
directory: the system's libibverbs is never touched.")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# CMAKE_INSTALL_PREFIX is /usr (not the staging directory) while cpack
# installs, so that softrnic.pc names the real paths.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX ${CPACK_PACKAGING_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
find_program(SOFTRNIC_DPKG dpkg)
if(SOFTRNIC_DPKG)
	execute_process(COMMAND ${SOFTRNIC_DPKG} --print-architecture
		OUTPUT_VARIABLE CPACK_DEBIAN_PACKAGE_ARCHITECTURE
		OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # softrnic_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON) # Depends, by dpkg-shlibdeps
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ibverbs-utils, perftest")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libibverbs-dev, pkg-config")
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build[^/]*/")
include(CPack)
