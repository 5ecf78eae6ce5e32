/**
 * The config as every command loads it: src/config's loader, with `auth_user` hashes checked by
 * src/auth's rules (so `--check` rejects a malformed hash or user name with its file:line:column).
 */
import type { Config } from '../config/config.js';
import { loadConfig } from '../config/load-config.js';
import { validatePasswordHash } from '../auth/password-hash.js';
import { checkUserName } from '../auth/basic-auth.js';

/**
 * @param isReload a reload in the serving process: only a regular file is read (see loadConfig's
 *   `isRegularFileRequired`)
 * @throws ConfigFileError, ConfigSyntaxError, ConfigValueError (see loadConfig)
 */
export function loadConfigFile(file: string, isReload = false): Config {
  return loadConfig(file, { validateAuthHash: validatePasswordHash, validateAuthUserName: checkUserName, isRegularFileRequired: isReload });
}
