/*
 * helios_vk.c: not a source of the Helios addon.
 *
 * Alpha's upstream Helios was a C addon compiled from this file name. This Helios is a Rust
 * (napi-rs) addon: its sources are src/ (build with `cargo build --release`, or
 * `npm run build:native`, on a machine with Rust), and the package ships it prebuilt as
 * native/helios.linux-x64-gnu.node, which `npm run build:native` also copies to
 * native/helios_vk.node.
 *
 * The file exists because Alpha's unchanged `alpha fleet deploy` (apps/cli/src/commands/fleet.ts)
 * uploads packages/helios/native/helios_vk.c beside the prebuilt helios_vk.node on every deploy
 * (it reads the file to hash it, and stops if it is missing). It compiles it on the instance only
 * when `ldd helios_vk.node` fails there or `--rebuild-native=true` is given, with
 * `gcc -shared ... -o helios_vk.node helios_vk.c`. That cannot produce the Rust addon, so it
 * stops here, before gcc writes anything: the prebuilt helios_vk.node already on the instance
 * is left as it was. A fleet machine needs no compiler: it runs the prebuilt addon, which loads
 * Vulkan at run time (dlopen of libvulkan.so.1) and links only libc, libm and libgcc_s.
 */
#error "Helios is a Rust addon: this file cannot be compiled into helios_vk.node. Deploy the prebuilt native/helios_vk.node (npm run build:native -w @alpha/helios) and drop --rebuild-native; to rebuild from source, run cargo build --release in packages/helios on a machine with Rust. See packages/helios/README.md, Inside Alpha."
